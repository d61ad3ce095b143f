//! The destructive rules, family by family: each spelling that must be
//! denied, and the ordinary lines that must not be.

use super::*;

fn denied(line: &str) -> Option<String> {
    let argv: Vec<Word> = line.split(' ').map(Word::new).collect();
    command(&argv)
}

#[test]
fn destructive_families() {
    for line in [
        "rm -rf /",
        "rm -fr //",
        "rm -r -f /./etc",
        "rm --recursive /usr",
        "rm --rec /var",
        "rm -R /etc/..",
        "rm -rf /*",
        "rm -rf $DIR",
        "rm -rf ~",
        "rm --no-preserve-root -rf /",
        "chmod -R 777 /",
        "chmod --recursive 000 /etc",
        "chown -R nobody /usr/",
        "chgrp -hR x /var",
        "mkfs.ext4 /dev/sda1",
        "mkswap /dev/sdb",
        "wipefs -a /dev/sda",
        "sgdisk -Z /dev/sda",
        "sfdisk /dev/sda",
        "parted /dev/sda mklabel gpt",
        "fdisk /dev/sda",
        "cryptsetup luksFormat /dev/sdb",
        "cryptsetup erase /dev/sdb",
        "lvremove -f vg/lv",
        "vgremove vg",
        "dd if=/dev/zero of=/dev/nvme0n1",
        "dd of=/dev/mapper/root",
        "dd of=/dev/vg0/root",
        "tee /dev/sda",
        "tee -a /etc/passwd",
        "shutdown -h now",
        "reboot",
        "poweroff",
        "init 0",
        "telinit 6",
        "systemctl poweroff",
        "systemctl -i reboot",
        "systemctl soft-reboot",
        "systemctl isolate rescue.target",
        "systemctl start poweroff.target",
        "loginctl poweroff",
        "kill -9 -1",
        "kill -KILL -1",
        "kill -s KILL -- -1",
        "kill -- -1",
        "kill -9 1",
        "killall5 -9",
        "find / -delete",
        "vim /etc/hosts",
        "mv /etc /tmp/x",
    ] {
        assert!(denied(line).is_some(), "{line}");
    }
}

#[test]
fn ordinary_commands_pass() {
    for line in [
        "rm -rf /tmp/build",
        "rm /etc/nginx/sites-enabled/old",
        "rm -f /etc",
        "chmod -R g+w /srv/app",
        "chmod 644 /etc/hosts",
        "dd if=/dev/sda of=/tmp/mbr bs=512 count=1",
        "fdisk -l",
        "sfdisk -l /dev/sda",
        "parted /dev/sda print",
        "parted -l",
        "sgdisk -p /dev/sda",
        "systemctl status reboot.target",
        "systemctl restart nginx",
        "kill -9 1234",
        "kill -HUP 4321",
        "kill -l",
        "shutdown -c",
        "find /tmp -delete",
        "tee /tmp/x",
    ] {
        assert_eq!(denied(line), None, "{line}");
    }
}

/// What the policy would say of a whole line: every command it runs
/// and every redirection, as `mod` asks.
fn line_denied(line: &str) -> Option<String> {
    let seen = see(line);
    seen.runs
        .iter()
        .find_map(|r| command(r))
        .or_else(|| seen.redirects.iter().find_map(redirect))
}

fn all_denied(lines: &[&str]) {
    for line in lines {
        assert!(line_denied(line).is_some(), "not denied: {line}");
    }
}

fn none_denied(lines: &[&str]) {
    for line in lines {
        assert_eq!(line_denied(line), None, "{line}");
    }
}

#[test]
fn paths_through_proc() {
    assert_eq!(system_path("/proc/1/task/1/root/etc/shadow"), "/etc/shadow");
    assert_eq!(system_path("/proc/self/root/proc/2/root/usr"), "/usr");
    assert_eq!(system_path("/proc/9/cwd/etc"), "etc");
    assert_eq!(system_path("/proc/9/task/10/cwd"), ".");
    assert_eq!(system_path("/srv/app/../etc"), "/srv/etc");
    assert!(device_name("sda1") && device_name("nvme0n1p2") && device_name("md0"));
    assert!(!device_name("md5sums") && !device_name("root.tar.gz") && !device_name("sdk.txt"));
}

#[test]
fn files_the_host_cannot_lose() {
    all_denied(&[
        "rm /lib64/ld-linux-aarch64.so.1",
        "rm -f /usr/lib64/libc.so.6",
        "unlink /lib/ld-musl-x86_64.so.1",
        "cd /lib64 && rm ld-linux-x86-64.so.2",
        "mv /bin/bash /tmp/",
        "mv -t /tmp /usr/sbin/sshd",
        "truncate -s0 /usr/lib/aarch64-linux-gnu/libssl.so.3",
        "shred /boot/initrd.img-6.1.0",
        "cp /tmp/x /lib/x86_64-linux-gnu/libc.so.6",
        "install -m 644 x /boot/vmlinuz-6.1.0",
        "echo > /etc/ld.so.preload",
        "rm /sbin/init",
        "rm -f /usr/sbin/*",
        "rm /et?/gr?up",
        "rm /etc/group",
        "rm /var/spool/cron/crontabs/alice",
        "rm /var/lib/dpkg/status",
        "rm -r /usr/lib/aarch64-linux-gnu/security",
        "rm -rf /etc/ssh",
        "rm -rf /var/lib/rpm",
        "mv /boot /tmp/boot",
        "mv /u?r /tmp",
        "find /lib/modules -name '*.ko' -delete",
        "rm -rf /proc/self/cwd/var",
        "rm -rf /proc/42/task/42/root/etc",
    ]);
    none_denied(&[
        "rm /var/lib/dpkg/lock",
        "rm -f /etc/nginx/sites-enabled/default",
        "rm /usr/local/bin/mytool",
        "rm -f /tmp/*.log",
        "rm -rf ./build",
        "rm -rf /etc/systemd/system/app.service.d",
        "mv /tmp/x /usr/local/bin",
        "mv app.log app.log.1",
        "cp /tmp/nginx.conf /etc/nginx/nginx.conf",
        "cp libfoo.so /usr/local/lib/",
        "ln -sf /usr/bin/python3 /usr/bin/python",
        "ln -sfn /opt/app-v2 /opt/app",
        "sed -i 's/x/sdk/' /srv/app/conf",
        "sed -i -e 's/a/b/' /etc/nginx/nginx.conf",
        "sed -i.bak 's/a/b/' /etc/fstab",
        "perl -pi -e 's/sda/sdb/' /etc/app.conf",
        "tee md5sums",
        "tar -czf root.tar.gz /root",
    ]);
}

#[test]
fn permissions_and_links_of_the_system() {
    all_denied(&[
        "chmod 0 /etc",
        "chmod 750 /usr/bin",
        "chmod a-x /lib64/ld-linux-x86-64.so.2",
        "chmod o= /usr",
        "chmod -x /usr/lib/x86_64-linux-gnu/libc.so.6",
        "chown nobody /",
        "chown alice:alice /etc",
        "ln -sfT /tmp/x /usr/lib",
        "ln --force --no-dereference -s /tmp /lib",
    ]);
    none_denied(&[
        "chmod 700 /root",
        "chmod 711 /home",
        "chmod 755 /",
        "chmod 4755 /usr/bin/find",
        "chmod 700 /usr/bin/gcc",
        "chown root:root /etc",
        "chown www-data:www-data /var/www",
        "chmod -R 700 /home/alice/.ssh",
    ]);
}

#[test]
fn the_directory_it_runs_in_may_be_root() {
    for line in [
        "cd / && find . -delete",
        "cd / && find -mindepth 1 -delete",
        "find -exec chown nobody {} +",
        "cd / && chmod -R 000 .",
        "env --chdir=/ chown -R nobody ./",
        "sudo -D / chown -hR nobody .",
    ] {
        let why = line_denied(line).unwrap_or_else(|| panic!("not denied: {line}"));
        assert!(why.contains("may be /"), "{line}: {why}");
    }
    none_denied(&[
        "find . -name '*.pyc' -delete",
        "find . -type f -name '*.log' -mtime +7 -delete",
        "find /tmp -type f -delete",
        "rm -rf build node_modules",
        "find . -type d -name __pycache__ -exec rm -rf {} +",
        "rm -rf .",
        "chmod -R g+w ./public",
    ]);
}

#[test]
fn cutting_the_network() {
    all_denied(&[
        "iptables -A OUTPUT -j REJECT",
        "ip6tables -I INPUT -p tcp --dport ssh -j DROP",
        "iptables -I INPUT 3 -p tcp -m multiport --dports 20:30 -j DROP",
        "iptables-nft --flush",
        "iptables --poli INPUT DROP",
        "xtables-legacy-multi ip6tables -F",
        "arptables-nft-restore /tmp/x",
        "nft -f /tmp/rules.nft",
        "ufw deny ssh",
        "ufw reject proto tcp to any port 22",
        "ufw deny in on eth0",
        "firewall-cmd --set-default-zone drop",
        "firewall-cmd --remove-port=22/tcp",
        "firewall-cmd --zone=block --change-interface=eth0",
        "firewall-cmd --direct --add-rule ipv4 filter INPUT 0 -j DROP",
        "ip route flush table main",
        "ip -o -4 a del 10.0.0.5/24 dev eth0",
        "ip link del eth0",
        "ip rule add blackhole to 0.0.0.0/0",
        "ip r replace default via 10.0.0.254",
        "ip -n blue ro d default",
        "ifconfig eth0 down",
        "tc qdisc replace dev eth0 root netem loss random 80%",
        "nmcli device disconnect eth0",
        "nmcli c down eth0",
        "nmcli connection delete eth0",
        "rmmod e1000e",
        "modprobe --remove ixgbe",
        "modprobe -rv mlx5_core",
        "systemctl stop sshd.service",
        "systemctl disable --now NetworkManager",
        "systemctl kill ssh",
    ]);
    none_denied(&[
        "iptables -A INPUT -s 203.0.113.7 -j DROP",
        "iptables -A INPUT -m conntrack --ctstate INVALID -j DROP",
        "iptables -A INPUT -p udp --dport 53 -j DROP",
        "iptables -A INPUT -p tcp --dport 3306 -j REJECT",
        "iptables -A FORWARD -j DROP",
        "iptables -L -n",
        "ufw allow 22/tcp",
        "ufw deny from 203.0.113.7",
        "ufw deny from 203.0.113.7 to any port 22",
        "ufw deny 3306/tcp",
        "ufw delete deny 22/tcp",
        "ip route add 10.0.0.0/8 via 10.0.0.1",
        "ip route show",
        "ip -br addr",
        "ip r g 1.1.1.1",
        "nmcli con show",
        "nmcli -f NAME,DEVICE con show",
        "tc qdisc add dev eth0 root netem delay 100ms",
        "systemctl restart sshd",
        "firewall-cmd --list-all",
        "firewall-cmd --zone=drop --list-all",
        "firewall-cmd --add-service=http --permanent",
        "modprobe br_netfilter",
        "nft list ruleset",
    ]);
}

#[test]
fn power_init_and_the_kernel() {
    all_denied(&[
        "systemctl restart systemd-halt.service",
        "systemctl start kexec.target",
        "systemctl set-default emergency.target",
        "systemctl add-requires default.target poweroff.target",
        "ln -s /lib/systemd/system/reboot.target /etc/systemd/system/multi-user.target.wants/reboot.target",
        "cp /lib/systemd/system/rescue.target /etc/systemd/system/default.target",
        "gdbus call --system --dest org.freedesktop.login1 --object-path /org/freedesktop/login1 --method org.freedesktop.login1.Manager.Suspend true",
        "busctl call org.freedesktop.systemd1 /org/freedesktop/systemd1 org.freedesktop.systemd1.Manager KillUnit ssi sshd.service all 9",
        "pm-hibernate",
        "ipmitool chassis power cycle",
        "ipmitool -I lanplus raw 0x00 0x02 0x02",
        "xfs_freeze -f /srv",
        "sysctl -w kernel.panic_on_oops=1",
        "sysctl net.ipv6.conf.all.disable_ipv6=1",
        "sysctl -w vm.nr_hugepages=999999",
        "umount -a",
        "umount -l /",
        "udevadm trigger -c remove",
        "echo b | sed 's/x/y/w /proc/sysrq-trigger'",
        "printf c | tee /proc/self/root/proc/sysrq-trigger",
        "dd of=/proc/self/cwd/proc/sysrq-trigger",
        "dmsetup suspend root",
    ]);
    none_denied(&[
        "systemctl set-default multi-user.target",
        "systemctl status reboot.target",
        "busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff",
        "ipmitool sensor list",
        "sysctl -w vm.swappiness=10",
        "sysctl -w kernel.panic=10",
        "sysctl -w vm.nr_hugepages=128",
        "umount /mnt/usb",
        "udevadm trigger",
        "mount -o remount,rw /",
    ]);
}

#[test]
fn disks_however_named() {
    all_denied(&[
        "tar -cvf/dev/vdb /srv",
        "sort -ro /dev/nvme0n1 x",
        "shuf -o/dev/sdb x",
        "cd /dev && uniq x sdb",
        "socat - GOPEN:/dev/mmcblk0",
        "socat -U /dev/sdc -",
        "python3 -c \"f=open('/dev/vda','r+b'); f.write(b'x')\"",
        "ruby -e 'File.write(\"/dev/sdb\", \"x\")'",
        "cat /dev/urandom > /dev/zvol/pool/vol",
        "nvme write /dev/nvme0n1 -s 0 -c 1 -z 512 -d /tmp/x",
        "hdparm --security-set-pass x /dev/sda",
        "mdadm --create /dev/md1 -l1 -n2 /dev/sdc /dev/sdd",
        "mdadm --grow /dev/md0 -n3",
        "mdadm --manage /dev/md0 --fail /dev/sdb1",
        "lvresize -L 10G vg0/root",
        "lvresize --size=-5G vg0/root",
        "ls /dev/sd* | xargs shred",
        "find /dev -name 'sd?' | xargs truncate -s 0",
        "shred -v $DISK",
    ]);
    none_denied(&[
        "lvresize -r -L +5G vg0/data",
        "mdadm --detail /dev/md0",
        "nvme smart-log /dev/nvme0",
        "hdparm -I /dev/sda",
        "cryptsetup luksDump /dev/sda2",
        "sort -o sorted.txt input.txt",
        "uniq a.txt b.txt",
        "shred -u /tmp/secret.txt",
        "socat - TCP:example.com:80",
        "awk '$1 ~ \"/dev/sd\"' /proc/mounts",
        "tar -xf /tmp/backup.tar -C /srv",
    ]);
}

/// What the fuzz target found: a word whose first character takes
/// three bytes made the reader of `-uroot` forms slice inside it (a panic,
/// so a refusal with no reason). Any word reads, and is judged as any
/// other: one pattern, no rule broken; with `-v`, every other process.
/// The same slip was in the reader of a recursive lambda's name.
#[test]
fn a_word_of_any_characters_reads() {
    for line in [
        "pkill kill 漢字",
        "pkill -漢",
        "pgrep 漢x",
        "killall \u{fffd}\u{fffd}ct",
    ] {
        assert_eq!(line_denied(line), None, "{line}");
    }
    assert!(line_denied("pkill -v 漢字").is_some());
    // A name before `=lambda` after a character of three bytes (a second
    // reader's find): read as the name it is.
    assert_eq!(line_denied("python -c 'fork;…=lambda'"), None);
    assert!(line_denied("python -c 'import os;…;f=lambda: os.fork() or f(); f()'").is_some());
}

#[test]
fn accounts_and_processes() {
    all_denied(&[
        "userdel --force root",
        "delgroup root",
        "newusers /tmp/users",
        "chage -M 0 root",
        "usermod --lock root",
        "usermod -s /usr/sbin/nologin root",
        "passwd --lock root",
        "sort -o /etc/shadow x",
        "uniq -c x /etc/group",
        "sed '$ w /etc/passwd' /tmp/x",
        "socat -u - OPEN:/etc/shadow",
        "python3 -c \"open('/etc/passwd','a').write('x::0:0::/:/bin/sh')\"",
        "awk 'BEGIN { print \"x\" >> \"/etc/shadow\" }'",
        "pkill -f usr",
        "pkill --full sbin",
        "pkill -KILL --uid=0",
        "pkill -P1",
        "killall --user root",
    ]);
    none_denied(&[
        "usermod -aG docker alice",
        "usermod -aG sudo root",
        "chage -l root",
        "passwd -S root",
        "deluser alice sudo",
        "awk -F: '{print $1}' /etc/passwd",
        "python3 -c \"print(open('/etc/passwd').read())\"",
        "pkill -f nginx",
        "pkill -u alice",
        "killall -s HUP nginx",
    ]);
}

#[test]
fn fork_bombs_in_code() {
    all_denied(&[
        "ruby -e 'def f; fork; f(); end; f()'",
        "node -e 'const f = () => { require(\"child_process\").fork(\"x\"); f() }; f()'",
        "perl -e 'fork; redo'",
        "awk 'BEGIN { for (;;) system(\"yes > /dev/null &\") }'",
    ]);
    none_denied(&[
        "perl -e 'for (1..3) { print $_ }'",
        "python3 -c 'import os; print(os.getpid())'",
        "python3 -c 'import os; pid = os.fork()'",
    ]);
}

#[test]
fn containers_clusters_and_packages() {
    all_denied(&[
        "podman ps -q | xargs podman rm --force",
        "docker rm -f $(docker ps -aq)",
        "docker-compose down --volumes",
        "podman compose down -v",
        "kubectl delete NODES worker-1",
        "kubectl delete Namespaces.v1 prod",
        "kubectl delete crd,svc foo",
        "kubectl delete pv/pv-1",
        "kubectl delete pods --all-namespaces=true",
        "oc delete projects demo",
        "crictl rmp --all",
        "docker run -v /etc:/mnt/etc alpine rm -f /mnt/etc/passwd",
        "podman run --mount type=bind,source=/,target=/h alpine chmod -R 777 /h/usr",
        "apt-get remove -y systemd",
        "apt purge openssh-server",
        "dnf erase glibc-2.34-60.el9",
        "pacman -Rdd glibc",
        "dpkg --purge --force-all coreutils",
        "dpkg -r libc6:amd64",
        "rpm -ev --nodeps bash",
        "apk del musl",
        "python3 -c 'import subprocess; subprocess.run([\"rm\", \"-rf\", \"/etc\"])'",
        "ruby -e 'require \"fileutils\"; FileUtils.rm_rf(\"/var\")'",
        "node -e 'require(\"fs\").rmSync(\"/usr\", {recursive: true})'",
        "perl -MFile::Path=remove_tree -e 'remove_tree(\"/boot\")'",
        "awk 'BEGIN { \"reboot\" | getline }'",
        "awk '{ print | \"sh -c reboot\" }'",
        "lua -e 'os.execute(\"poweroff\")'",
        "php -r 'shell_exec(\"rm -rf /etc\");'",
        "python3 -c 'import os; os.remove(\"/etc/shadow\")'",
        "perl -e 'print `shutdown -h now`'",
        "socat - EXEC:reboot",
    ]);
    none_denied(&[
        "docker rm -f web",
        "docker rm $(docker ps -aq -f status=exited)",
        "docker volume rm pgdata",
        "docker compose down",
        "kubectl delete pod web-0",
        "kubectl delete svc web -n ns",
        "docker run -v /:/host:ro alpine ls /host/etc",
        "docker run --rm -v /srv/data:/data alpine rm -rf /data/tmp",
        "apt-get remove nginx",
        "dnf remove -y nginx",
        "pacman -R firefox",
        "dpkg -r mypkg",
        "rpm -e mypkg",
        "python3 -c 'import shutil; shutil.rmtree(\"/tmp/build\")'",
        "awk 'BEGIN{system(\"id\")}'",
        "python3 -c 'import subprocess; subprocess.run([\"systemctl\",\"status\",\"nginx\"])'",
        "python3 manage.py run",
        "bundle exec rake 'system(\"reboot\")'",
        "rsync -t /etc/passwd /srv/backup/",
    ]);
}

#[test]
fn nesting_ends_and_what_is_too_deep_is_refused() {
    // Containers in containers, each mounting the host: every level fans
    // out over the words that may start its command.
    let docker = "docker run -v /:/h x ".repeat(300) + "ls";
    assert!(denied(&docker).is_some(), "{docker}");
    // Shallow nesting is still judged by what it runs.
    assert!(denied("docker run -v /:/host alpine ls /host").is_none());
}
