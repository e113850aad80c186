#!/bin/bash
# Sorted names, fixed owner and mtime, gzip without a time stamp: the archive is byte-reproducible.
mkdir -p /home/user/backups
cd /home/user/project
find src -type f -name '*.py' | LC_ALL=C sort \
    | tar --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - -T - | gzip -n > /home/user/backups/project-src.tar.gz
cd /home/user/backups
sha256sum project-src.tar.gz > project-src.tar.gz.sha256
