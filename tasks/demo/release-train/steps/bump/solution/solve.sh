#!/bin/bash
cd /home/user/release
# Already released: bumping again would skip a version.
if head -n 1 CHANGES.md | grep -q '^# Release '; then exit 0; fi
IFS=. read -r major minor patch < VERSION
if grep -q '^- BREAKING:' CHANGES.md; then
    major=$((major + 1)); minor=0; patch=0
elif grep -qx '## Features' CHANGES.md; then
    minor=$((minor + 1)); patch=0
else
    patch=$((patch + 1))
fi
version="$major.$minor.$patch"
echo "$version" > VERSION
{ printf '# Release %s\n\n' "$version"; cat CHANGES.md; } > CHANGES.md.new && mv CHANGES.md.new CHANGES.md
