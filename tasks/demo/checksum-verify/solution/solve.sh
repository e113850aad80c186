#!/bin/bash
# sha256sum -c prints "<name>: OK" or "<name>: FAILED"; keep the names of the failures.
cd /home/user/downloads
sha256sum -c SHA256SUMS 2>/dev/null | sed -n 's/: FAILED$//p' | LC_ALL=C sort > bad_files.txt
