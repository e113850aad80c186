#!/bin/bash
# Everything comes from what the earlier steps left: the batch, its id and the damaged part.
cd /home/user/incoming/batch
damaged=$(cat /home/user/report/damaged.txt)
out=/home/user/report/assembled.dat
: > "$out"
count=0
for part in part-*.dat; do
    [ "$part" = "$damaged" ] && continue
    cat "$part" >> "$out"
    count=$((count + 1))
done
id=$(sed -n 's/^# batch //p' MANIFEST.sha256)
sum=$(sha256sum "$out" | cut -d' ' -f1)
printf 'batch=%s\nparts=%s\nsha256=%s\n' "$id" "$count" "$sum" > /home/user/report/summary.txt
