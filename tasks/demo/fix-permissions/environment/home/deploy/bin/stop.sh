#!/bin/bash
# stop the service (SIGTERM, then SIGKILL after 10 s)
pkill -TERM -f /opt/app/bin/server; sleep 10; pkill -KILL -f /opt/app/bin/server
