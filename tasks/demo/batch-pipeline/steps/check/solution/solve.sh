#!/bin/bash
# Which part is damaged is only known by checking: sha256sum reports it as FAILED.
cd /home/user/incoming/batch
sha256sum -c MANIFEST.sha256 2>/dev/null | sed -n 's/: FAILED$//p' > /home/user/report/damaged.txt
