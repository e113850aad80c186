#!/bin/bash
# Only names that match the camera pattern exactly; the glob is sorted in byte order (C.UTF-8).
cd /home/user/photos
re='^IMG_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{6})\.jpg$'
for f in IMG_*.jpg; do
    [[ $f =~ $re ]] || continue
    new="${BASH_REMATCH[1]}-${BASH_REMATCH[2]}-${BASH_REMATCH[3]}_${BASH_REMATCH[4]}.jpg"
    mv -n -- "$f" "$new"
    echo "$f $new" >> rename_log.txt
done
