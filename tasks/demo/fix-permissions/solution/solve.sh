#!/bin/bash
chmod 755 /home/user/deploy/bin/*.sh
chmod 600 /home/user/deploy/secrets.env /home/user/deploy/private/id_deploy
chmod 700 /home/user/deploy/private
