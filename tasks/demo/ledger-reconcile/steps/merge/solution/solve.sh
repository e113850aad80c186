#!/bin/bash
cd /home/user/ledger
{
    echo "date,id,category,amount"
    tail -q -n +2 2024-01.csv 2024-02.csv 2024-03.csv | LC_ALL=C sort -t, -k1,1 -k2,2 -u
} > q1.csv
