df -h -x tmpfs -x devtmpfs -x squashfs -x overlay
df -i -x tmpfs -x devtmpfs -x squashfs -x overlay
du -xh --max-depth=1 / 2>/dev/null | sort -rh | head -n 15
find / -xdev -type f -size +500M 2>/dev/null | head -n 20
journalctl --disk-usage
lsof -nP +L1 2>/dev/null | head -n 20
