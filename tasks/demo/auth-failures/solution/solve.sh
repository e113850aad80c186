#!/bin/bash
mkdir -p /home/user/reports
out=/home/user/reports/ssh_failures.csv
echo "ip,failures,users" > "$out"
# "for invalid user X from IP" and "for X from IP": the user is the word before "from".
grep 'sshd\[[0-9]*\]: Failed password for ' /home/user/logs/auth.log \
    | sed -E 's/.*Failed password for (invalid user )?([^ ]+) from ([^ ]+) port .*/\3 \2/' \
    | LC_ALL=C sort -u -k1,1 -k2,2 > /tmp/ssh_pairs.txt
grep 'sshd\[[0-9]*\]: Failed password for ' /home/user/logs/auth.log \
    | sed -E 's/.* from ([^ ]+) port .*/\1/' | LC_ALL=C sort | uniq -c > /tmp/ssh_counts.txt
while read -r count ip; do
    [ "$count" -ge 3 ] || continue
    users=$(awk -v ip="$ip" '$1 == ip {print $2}' /tmp/ssh_pairs.txt | LC_ALL=C sort | paste -sd ';')
    echo "$count $ip $users"
done < /tmp/ssh_counts.txt | LC_ALL=C sort -k1,1nr -k2,2 | awk '{print $2 "," $1 "," $3}' >> "$out"
