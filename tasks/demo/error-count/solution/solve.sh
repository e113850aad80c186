#!/bin/bash
# Count entries by their level field, not by any mention of the word.
mkdir -p /home/user/reports
awk '$3 == "ERROR"' /home/user/logs/app.log | wc -l > /home/user/reports/error_count.txt
