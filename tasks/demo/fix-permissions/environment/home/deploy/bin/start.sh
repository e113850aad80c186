#!/bin/bash
# start the service on port 8443
exec /opt/app/bin/server --port 8443 --workers 4
