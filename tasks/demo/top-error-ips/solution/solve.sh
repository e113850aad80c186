#!/bin/bash
mkdir -p /home/user/reports
awk '$9 >= 500 && $9 <= 599 {print $1}' /home/user/logs/access.log | sort | uniq -c \
    | sort -k1,1nr -k2,2 | head -n 3 | awk '{print $1, $2}' > /home/user/reports/top_error_ips.txt
