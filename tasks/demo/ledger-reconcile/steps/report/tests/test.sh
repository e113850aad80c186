#!/bin/bash
# Harbor verifier entry point, offline: the image's own pytest, no network preamble.
mkdir -p /logs/verifier
if pytest -p no:cacheprovider -rA /tests/test_state.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
