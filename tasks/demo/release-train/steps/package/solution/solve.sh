#!/bin/bash
cd /home/user/release
version=$(cat VERSION)
mkdir -p dist
tar --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - VERSION CHANGES.md | gzip -n > "dist/app-$version.tar.gz"
(cd dist && sha256sum "app-$version.tar.gz" > SHA256SUMS)
rm -f fragments/[0-9]*.txt
