# sourced by the other scripts, never run directly (since 2021)
log() { echo "[$(date +%s)] $*"; }
