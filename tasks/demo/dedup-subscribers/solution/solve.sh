#!/bin/bash
cd /home/user/lists
cat subscribers_a.txt subscribers_b.txt | tr -d '\r' | tr 'A-Z' 'a-z' \
    | sed 's/^[[:space:]]*//; s/[[:space:]]*$//; /^$/d' | LC_ALL=C sort -u > all_subscribers.txt
