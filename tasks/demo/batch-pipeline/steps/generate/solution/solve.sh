#!/bin/bash
mkdir -p /home/user/report
id=$(/home/user/tools/new_batch.sh)
echo "$id" > /home/user/report/batch_id.txt
