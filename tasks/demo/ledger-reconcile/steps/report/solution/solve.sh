#!/bin/bash
# Sums in integer cents, so no floating point rounding creeps into the totals.
cd /home/user/ledger
cents='{ split($4, p, "."); c = p[1] * 100 + (substr($4, 1, 1) == "-" ? -p[2] : p[2]) }'
fmt='function show(c) { s = c < 0 ? "-" : ""; c = c < 0 ? -c : c; return sprintf("%s%d.%02d", s, int(c / 100), c % 100) }'
{
    echo "category,total"
    awk -F, "$fmt NR > 1 $cents NR > 1 { t[\$3] += c } END { for (k in t) print k \",\" show(t[k]) }" q1.csv | LC_ALL=C sort
    awk -F, "$fmt NR > 1 $cents NR > 1 { s += c } END { print \"TOTAL,\" show(s) }" q1.csv
} > q1_by_category.csv
