#!/bin/bash
# new_batch.sh: create the data batch in /home/user/incoming/batch/ and print its id.
# The id, the parts' contents and which part arrives damaged are drawn from /dev/urandom,
# so nobody can know them before the batch exists. If the batch already exists, nothing is
# changed and its id is printed again.
set -eu
dir=/home/user/incoming/batch
if [ -f "$dir/MANIFEST.sha256" ]; then
    sed -n 's/^# batch //p' "$dir/MANIFEST.sha256"
    exit 0
fi
mkdir -p "$dir"
id=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
damaged=$(( $(od -An -N1 -tu1 /dev/urandom | tr -d ' \n') % 6 + 1 ))
echo "# batch $id" > "$dir/MANIFEST.sha256.tmp"
for i in 1 2 3 4 5 6; do
    part=$(printf 'part-%02d.dat' "$i")
    od -An -N48 -tx1 /dev/urandom | tr -d ' ' > "$dir/$part"
    (cd "$dir" && sha256sum "$part") >> "$dir/MANIFEST.sha256.tmp"
done
# The damage happens in transit, after the checksums were taken: one hex digit changes.
part="$dir/$(printf 'part-%02d.dat' "$damaged")"
sed -i '2s/^0/#/; 2s/^[1-9a-f]/0/; 2s/^#/1/' "$part"
mv "$dir/MANIFEST.sha256.tmp" "$dir/MANIFEST.sha256"
echo "$id"
