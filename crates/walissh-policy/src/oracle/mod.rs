//! The execution oracle (test support: the crate's tests, and the
//! `oracle` feature): what a real shell runs for a line.
//!
//! It owns the answer to "which programs, with which argv, does
//! `SHELL -c LINE` start?", so the approval policy can be checked against
//! the shell itself rather than against another parser. Nothing it runs is
//! real: every program on the jail's disk is a logging stub.
//!
//! # The jail
//!
//! [`Oracle::new`] builds a throwaway root in a temporary directory, once
//! (about 0.1 s, a trial run included):
//!
//! - `/usr/bin` and `/usr/sbin` hold a stub under every name in [`STUBS`]
//!   (coreutils, util-linux, procps, iproute2, systemd, disk, network,
//!   package, cloud and container tools, every program the corpora in
//!   `tests/policy/` name). `/bin` and `/sbin` are links to them, as on a
//!   merged-`/usr` system, so `/bin/rm`, `/usr/bin/env` and `/???/?m` all
//!   reach a stub. `/usr/local/bin` and `/usr/local/sbin` are empty.
//! - A stub is a short script run by the jail's own dash (`/.oracle/stub`,
//!   hard-linked under each name). It writes its argv, `${0##*/}` first,
//!   each field followed by a NUL and the record by a newline, to a file
//!   of its own, `/.oracle/log/N`: N is the first free number, claimed with
//!   an exclusive create (`set -C`), so records never interleave and their
//!   numbers give the order the programs started. Then it exits 0 (`false`
//!   exits 1), printing nothing and reading nothing. A script, not a
//!   binary: nothing to compile, and every byte of it is readable below.
//!   The cost: argv\[0] is the basename of the path the kernel ran, so
//!   `exec -a NAME` or `hash -p /bin/rm ls; ls` report `rm`.
//! - `sh`, `dash`, `bash` and `zsh` are stubs that log and then exec the
//!   real shell (copied to `/.oracle/real` with the libraries `ldd` lists;
//!   no zsh modules, so no `zsh/net/tcp` or `zsh/files`), so `sh -c '…'`
//!   and `bash -c '…'` show what their scripts run. Other shells (`ksh`,
//!   `busybox`, `toybox`, `fish`, ...) are plain stubs.
//! - A few files exist so globs, tildes and input redirections have
//!   something to match: the cwd `/w` holds `a.txt`, `b.log`, `c.conf`,
//!   `.hidden` and `sub/d.txt`; `/etc/passwd` names `root` and `x` (HOME
//!   `/home/x`); a host key, a user key, `/etc/shadow`, `/etc/shadow-`,
//!   `/etc/hosts`, `/proc/1/environ`, `/tmp/img`, ... exist ([`FILES`]).
//!   `/dev/fd`, `/dev/stdin`, ... lead to a procfs of the run's own
//!   (mounted in its own mount namespace, where one is allowed), so `.
//!   /dev/stdin` and process substitutions work.
//! - Redirections succeed wherever a real system has the directory: `/`,
//!   `/w`, `/tmp`, `/etc`, `/dev`, `/dev/mapper`, `/proc`, `/proc/sys/*`,
//!   `/root`, `/home/x` and their dot-directories, `/var/log`, ... are
//!   world-writable (sticky), and `/dev/null` is an empty regular file, so
//!   `echo b > /proc/sysrq-trigger` runs its `echo` as a real shell would
//!   (a failed redirection would skip the command and hide it). After each
//!   run everything the line created is removed and every file above is
//!   restored. The shells cannot create directories, links or devices
//!   (those need programs, and all programs are stubs).
//!
//! # A run
//!
//! [`Oracle::run`] starts `bash -c -- LINE`, `sh -c PREAMBLE⏎LINE` (dash)
//! or `zsh -f -c -- LINE` in the jail, with the environment `PATH`, `HOME` and
//! `SOME_SECRET=s3cr3t` only, stdin from `/dev/null`. It waits until every
//! process of the run has ended (background jobs and daemons included:
//! the run's first process is the init of a PID namespace, or a child
//! subreaper where namespaces are not allowed), at most [`TIMEOUT`], then
//! reads the records. A run takes a few milliseconds.
//!
//! # Why nothing is real
//!
//! - `chroot` into the jail, then, as root, `setgroups([])`, `setgid`,
//!   `setuid` to an unused account (`JAIL_UID_BASE` + a per-oracle
//!   number); not root, a user namespace maps that account to the caller
//!   (see [`Account`]). Either way the line runs with no capability, so
//!   it cannot leave the chroot, and every program it can reach is a stub.
//!   Stubs and shells are not writable by the line.
//! - New PID, mount and (when allowed) network namespaces per run; a
//!   seccomp filter fails `socket(2)` with `EACCES`, so bash's
//!   `/dev/tcp/HOST/PORT` reaches nobody even without the namespace;
//!   `no_new_privs`; all descriptors but 0-2 closed. The run's procfs is
//!   mounted in its own mount namespace, made private first, so the host
//!   never sees it.
//! - Limits: `RLIMIT_NPROC` 256 (the jail's account runs nothing else, so
//!   a fork bomb stops there; 200 nested `$(…)` still run), address space
//!   512 MiB a process, files 16 MiB, CPU 10 s, 64 descriptors, no core
//!   files. After [`TIMEOUT`] the run is killed: its PID namespace dies
//!   with its init. Where no namespace is allowed (root only), the init is
//!   a child subreaper, and a helper running as the jail account stops,
//!   then kills, all its processes (`kill(-1)`) while the init reaps them.
//! - The child processes make raw system calls only, on memory prepared
//!   before the fork (glibc's `setresuid` would wait for the parent's
//!   other threads, which the child does not have).

//! # Which builtins are observed
//!
//! Builtins that also exist as programs are routed to the stubs, so they
//! are logged like programs: `echo`, `printf`, `test`, `[`, `kill`, `pwd`,
//! `true`, `false` (and zsh's `which`). bash: `enable -n` them in a file
//! named by `BASH_ENV` (which a non-interactive bash reads before its
//! `-c` string; the file unsets `BASH_ENV`, and the `bash` stub sets it
//! again for nested shells). zsh: `disable` them in `/etc/zsh/zshenv`,
//! which every zsh reads, `-f` or not. dash reads no file when it is not
//! interactive, so its preamble (functions of those names that call the
//! stub by absolute path; an alias for `[`, which is not a valid function
//! name) is put in front of the `-c` string, on lines of its own: dash
//! parses and runs a `-c` string one complete command at a time, so the
//! line is parsed exactly as `sh -c LINE` parses it (only `$LINENO`
//! differs). The `sh`/`dash` stub does the same to a nested `sh -c`.
//! Not observed:
//!
//! - builtins that change how the shell itself runs (`eval`, `exec`,
//!   `command`, `builtin`, `source`/`.`, `cd`, `set`, `shopt`, `alias`,
//!   `enable`, `hash`, `trap`, `read`, `declare`/`typeset`/`local`,
//!   `export`, `let`, `ulimit`, `umask`, `wait`, `type`, `print`, ...):
//!   the oracle sees what they end up running, not them;
//! - a routed builtin reached around the route: `builtin echo`,
//!   `command echo` in dash, `enable echo; echo` in bash;
//! - the side effects of the routed builtins, which the stubs do not
//!   have: bash's `printf -v 'a[$(cmd)]' x` and `test -v 'a[$(cmd)]'`
//!   evaluate the subscript and run `cmd`; here `printf`/`test` are logged
//!   and `cmd` is not. (`[[ -v … ]]`, `(( … ))` and `let` still run it.)
//! - shells that take their script from a file or stdin (`sh x.sh`,
//!   `… | sh`): they are logged, but their builtins are not routed.
//!
//! # What a run does not model
//!
//! - Stubs print nothing and (but `false`) succeed: `$(echo rm) x` runs
//!   `x`, `false || rm x` runs `rm`, `[ -f x ] || rm x` does not, `cat
//!   list | xargs rm` runs no `rm`. Runners (`sudo`, `env`, `xargs`,
//!   `find -exec`, `nohup`, ...) are logged with their argv and run
//!   nothing: unwrapping them is the policy's job.
//! - Commands of concurrent jobs (the members of a pipeline, `&`) may log
//!   in either order; compare them as a multiset when that matters.
//! - Names not in [`STUBS`] are "command not found" and are not logged;
//!   [`Oracle::run_with_output`] returns the shell's output to see them.
//! - It is `SHELL -c`: non-interactive, so bash expands no aliases, and
//!   no rc file, history or prompt is involved. Arguments that are not
//!   UTF-8 are returned lossily. bash's `$0` in a nested `bash -c` is
//!   `/.oracle/real/bash`.

use std::collections::HashSet;
use std::ffi::{CString, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The shell a line is run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    Bash,
    /// `/bin/sh` on Debian and Ubuntu.
    Dash,
    Zsh,
}

impl Shell {
    const ALL: [Shell; 3] = [Shell::Bash, Shell::Dash, Shell::Zsh];

    fn name(self) -> &'static str {
        match self {
            Shell::Bash => "bash",
            Shell::Dash => "dash",
            Shell::Zsh => "zsh",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How long a run may take before it is killed.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// Jail accounts are `JAIL_UID_BASE + (pid % 65536) * 64 + n`: unused on
/// any real system, and one per oracle, so the process limit and the
/// checks for leftovers count only that oracle's runs.
const JAIL_UID_BASE: u32 = 0x5A00_0000;

/// The account the line runs as inside a user namespace (not root).
const NS_UID: u32 = 65534;

/// Where the line starts, inside the jail.
const CWD: &str = "/w";

const ENV: &[&str] = &[
    "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
    "HOME=/home/x",
    "SOME_SECRET=s3cr3t",
];

/// Builtins that are also programs, routed to the stubs (zsh adds `which`).
const ROUTED: &[&str] = &[
    "echo", "printf", "test", "[", "kill", "pwd", "true", "false",
];

/// The bash preamble, read through `BASH_ENV`.
fn bash_rc() -> String {
    let names: Vec<String> = ROUTED.iter().map(|n| format!("'{n}'")).collect();
    format!("unset BASH_ENV\nenable -n {}\n", names.join(" "))
}

/// The shell integration a typed run types through, which the oracle
/// does not know itself (it knows shells and programs, not walissh's
/// terminal): the bash script that installs it, the key that ends a line
/// typed through it, and what a prompt's end looks like on the terminal.
/// walissh's tests give it walissh's own.
pub struct Integration {
    pub script: String,
    pub accept: Vec<u8>,
    pub prompt_end: Vec<u8>,
}

/// The rc file of a typed run: a plain prompt, the integration's script,
/// and the routed builtins but `printf` (which walissh's integration runs
/// as `builtin printf`) sent to the stubs.
fn typed_rc(script: &str) -> String {
    let names: Vec<String> = ROUTED
        .iter()
        .filter(|n| **n != "printf")
        .map(|n| format!("'{n}'"))
        .collect();
    format!("PS1='$ '\n{script}\nenable -n {}\n", names.join(" "))
}

/// The zsh preamble, `/etc/zsh/zshenv`.
fn zshenv() -> String {
    let names: Vec<String> = ROUTED.iter().map(|n| format!("'{n}'")).collect();
    format!("disable {} which\n", names.join(" "))
}

/// The dash preamble, put in front of every `-c` string, each command on a
/// line of its own.
fn dash_rc() -> String {
    let mut rc = String::new();
    for name in ROUTED {
        if *name == "[" {
            rc.push_str("alias '['=/usr/bin/[\n");
        } else {
            rc.push_str(&format!("{name}() {{ /usr/bin/{name} \"$@\"; }}\n"));
        }
    }
    rc
}

/// The record every stub writes (the common head of all stubs).
const STUB_LOG: &str = r#"#!/.oracle/real/dash
# walissh oracle stub: record argv in /.oracle/log/N (first free N), run nothing.
# Skip the records that exist (stat only), then claim one with an exclusive
# create; a concurrent stub may claim it first: then try the next one.
n=0
set -C
while :; do
  while [ -e "/.oracle/log/$n" ]; do n=$((n+1)); done
  { printf '%s\0' "${0##*/}" "$@"; printf '\n'; } 2>&- >"/.oracle/log/$n" && break
  [ -e "/.oracle/log/$n" ] || break
done
set +C
"#;

const STUB_TAIL: &str = "[ \"${0##*/}\" = false ] && exit 1\nexit 0\n";

const STUB_BASH_TAIL: &str =
    "BASH_ENV=/.oracle/bash.rc exec /.oracle/real/bash --rcfile /.oracle/bash.rc \"$@\"\n";

const STUB_ZSH_TAIL: &str = "exec /.oracle/real/zsh \"$@\"\n";

/// `sh`/`dash`: find the `-c` string, if any, and put the preamble in
/// front of it. dash's options: clusters of letters after `-` or `+`; each
/// `o` takes the next argument; `--` or `-` ends them; with `c`, the first
/// operand is the command string.
const STUB_DASH_TAIL: &str = r#"pre=$(cat_preamble)
c= st=0 i=0 n=$#
while [ "$i" -lt "$n" ]; do
  a=$1; shift; i=$((i+1))
  if [ "$st" = 0 ]; then
    case $a in
      --|-) st=1 ;;
      [-+]*o*)
        case $a in -*c*) c=1 ;; esac
        if [ "$i" -lt "$n" ]; then set -- "$@" "$a"; a=$1; shift; i=$((i+1)); fi ;;
      -*) case $a in *c*) c=1 ;; esac ;;
      +*) ;;
      *) st=2; if [ -n "$c" ]; then a="$pre
$a"; fi ;;
    esac
  elif [ "$st" = 1 ]; then
    st=2; if [ -n "$c" ]; then a="$pre
$a"; fi
  fi
  set -- "$@" "$a"
done
exec /.oracle/real/dash "$@"
"#;

/// Every name with a stub, in `/usr/bin` and `/usr/sbin`.
const STUBS: &str = "
ipmitool pkexec sg [ arch b2sum base32 base64 basename basenc cat chcon chgrp chmod chown chroot cksum comm cp
csplit cut date dd df dir dircolors dirname du echo env expand expr factor false fmt fold groups
head hostid id install join link ln logname ls md5sum mkdir mkfifo mknod mktemp mv nice nl nohup
nproc numfmt od paste pathchk pinky pr printenv printf ptx pwd readlink realpath rm rmdir runcon
seq sha1sum sha224sum sha256sum sha384sum sha512sum shred shuf sleep sort split stat stdbuf stty
sum sync tac tail tee test timeout touch tr true truncate tsort tty uname unexpand uniq unlink
users vdir wc who whoami yes
addpart agetty blkdiscard blkid blkzone blockdev cal cfdisk chcpu chfn chmem choom chrt chsh col
colcrt colrm column ctrlaltdel delpart dmesg eject fallocate fdformat fdisk findfs findmnt flock
fsck fsck.ext2 fsck.ext3 fsck.ext4 fsck.vfat fsck.xfs fsfreeze fstrim getopt hardlink hexdump
hwclock ionice ipcmk ipcrm ipcs irqtop isosize kill last lastb lastlog ldattach linux32 linux64
logger login look losetup lsblk lscpu lsfd lsipc lsirq lslocks lslogins lsmem lsns mcookie mesg
mkfs mkfs.bfs mkfs.btrfs mkfs.cramfs mkfs.exfat mkfs.ext2 mkfs.ext3 mkfs.ext4 mkfs.f2fs
mkfs.fat mkfs.minix mkfs.msdos mkfs.ntfs mkfs.vfat mkfs.xfs mkdosfs mke2fs mkntfs mkswap more
mount mountpoint namei nologin nsenter partx pivot_root prlimit readprofile rename renice
resizepart rev rfkill rtcwake runuser script scriptlive scriptreplay setarch setpriv setsid
setterm sfdisk su sulogin swaplabel swapoff swapon switch_root taskset uclampset ul umount
unshare utmpdump uuidgen uuidparse wall wdctl whereis wipefs write zramctl
free kill pgrep pidof pidwait pkill pmap ps pwdx skill slabtop snice sysctl tload top uptime
vmstat w watch killall killall5 fuser pstree peekfd prtstat
ip ss bridge tc devlink rtmon genl nstat lnstat ifstat routel rtacct ctstat rdma dcb
ifconfig ifdown ifup route netstat arp ipmaddr iptunnel mii-tool nameif plipconfig slattach
systemctl journalctl loginctl hostnamectl timedatectl localectl machinectl busctl
systemd-analyze systemd-run systemd-cgls systemd-cgtop systemd-resolve resolvectl networkctl
coredumpctl bootctl homectl portablectl systemd-nspawn systemd-escape systemd-cat
systemd-tmpfiles systemd-sysusers systemd-inhibit systemd-ask-password systemd-detect-virt
systemd-notify systemd-path systemd-socket-activate systemd-stdio-bridge udevadm shutdown
reboot halt poweroff init telinit runlevel service update-rc.d invoke-rc.d chkconfig
e2fsck tune2fs resize2fs debugfs dumpe2fs e2label e2image xfs_repair xfs_admin xfs_growfs
xfs_info btrfs btrfsck parted partprobe gdisk sgdisk cgdisk fixparts growpart hdparm sdparm
smartctl nvme cryptsetup dmsetup dmstats lvm lvcreate lvremove lvresize lvextend lvreduce
lvrename lvconvert lvchange lvs lvscan lvdisplay vgcreate vgremove vgs vgscan vgdisplay
vgchange vgreduce vgextend vgrename pvcreate pvremove pvs pvscan pvdisplay pvmove pvresize
mdadm zpool zfs badblocks blkdeactivate sg_format kpartx multipath
curl wget nc ncat netcat nc.openbsd nc.traditional socat ping ping4 ping6 traceroute
traceroute6 tracepath mtr dig host nslookup delv drill whois telnet ssh scp sftp rsync ftp
lftp tftp tcpdump tshark nmap iptables ip6tables iptables-save iptables-restore nft ufw
firewall-cmd ethtool iw iwconfig arping openssl ssh-keygen ssh-keyscan ssh-add ssh-agent
ssh-copy-id sshd gpg gpg2 certbot mail mailx sendmail aria2c axel http https xh nmcli
sudo doas sudoedit visudo passwd chpasswd chgpasswd useradd userdel usermod groupadd
groupdel groupmod adduser deluser addgroup delgroup chage gpasswd newgrp vipw vigr pwck grpck
crontab at atq atrm batch
grep egrep fgrep rgrep zgrep zegrep zfgrep zcat zless zmore bzcat xzcat zstdcat gzip gunzip
bzip2 bunzip2 xz unxz lzma zstd unzstd lz4 tar cpio zip unzip 7z sed awk gawk mawk nawk
perl python python2 python3 ruby irb node nodejs deno php lua luajit tclsh jq yq less most
vi vim vim.basic vim.tiny view nvim nano emacs ed ex pico joe mcedit xxd file strings diff
diff3 sdiff cmp patch find xargs locate mlocate plocate updatedb which tree bc dc m4 make cc
gcc g++ clang ld as objdump readelf iconv dos2unix unix2dos fold look rg ag ack fd fzf
sh bash dash zsh rbash ksh ksh93 mksh pdksh fish csh tcsh ash busybox toybox
strace ltrace gdb perf time unbuffer expect tmux screen byobu capsh nsjail firejail bwrap
chpst s6-setuidgid gosu su-exec fakeroot proot schroot ionice cgexec cgclassify numactl
apt apt-get apt-cache apt-key apt-mark dpkg dpkg-query dpkg-reconfigure aptitude rpm yum dnf
zypper apk pacman snap flatpak pip pip3 pipx npm npx yarn pnpm gem bundle cargo rustup go
docker docker-compose podman buildah skopeo crictl ctr nerdctl runc kubectl kubeadm kubelet
helm k9s kustomize minikube kind k3s oc aws gcloud gsutil bq az doctl hcloud terraform tofu
packer vault consul nomad ansible ansible-playbook salt git git-credential-store gh glab svn
hg
nginx apache2 apache2ctl apachectl httpd haproxy caddy mysql mysqladmin mysqldump mariadb
psql pg_dump pg_dumpall pg_ctl pg_ctlcluster pg_lsclusters pg_isready redis-cli mongo mongosh
sqlite3 rabbitmqctl supervisorctl pm2 php-fpm memcached etcdctl
getent getfacl setfacl chattr lsattr getcap setcap lsof ausearch aureport auditctl faillock
aa-status sestatus getenforce setenforce restorecon semanage
hostname domainname dnsdomainname ypdomainname iostat mpstat sar pidstat iotop nethogs iftop
htop atop btop glances nmon dstat lspci lsusb lshw dmidecode sensors inxi hwinfo lsmod modprobe
insmod rmmod modinfo depmod kexec cron crond logrotate ldd ldconfig mkinitramfs update-initramfs
dracut update-grub grub-install grub-mkconfig efibootmgr chvt openvt deallocvt kbd_mode loadkeys
setfont base64 journalctl uptime tzselect locale localedef sudoreplay run-parts savelog tempfile
mountstats nfsstat showmount exportfs smbclient rpcinfo ntpq chronyc ntpdate timedatectl
ipvsadm conntrack arptables ebtables wg wg-quick openvpn tailscale zerotier-cli
clear reset tput infocmp tic toe setsid nsupdate keyctl getconf ulimit
";

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// Who the line runs as.
#[derive(Clone, Copy, Debug)]
enum Account {
    /// We are root: the line runs as this otherwise unused uid and gid.
    Root { uid: u32 },
    /// Not root: the run's init maps uid 0 of a user namespace to the
    /// caller, and the line runs as `NS_UID` of a namespace nested in it,
    /// mapped to that 0 (so to the caller), without capabilities.
    UserNs { outer_uid: u32, outer_gid: u32 },
}

/// The oracle: a throwaway root holding stubs and three real shells.
pub struct Oracle {
    /// The temporary directory: `root/` is the jail, `output` is outside.
    _dir: tempfile::TempDir,
    root: PathBuf,
    output: PathBuf,
    account: Account,
    /// What typed runs type through; none: they are refused.
    integration: Option<Integration>,
    /// Namespaces for the run's init (`CLONE_NEWPID` at least, unless root
    /// could not make one).
    clone_flags: libc::c_int,
    shells: [bool; 3],
    timeout: Duration,
    /// Directories the line may write, with what they held when built.
    writable: Vec<(PathBuf, HashSet<OsString>)>,
    /// Files in those directories, restored after each run.
    pristine: Vec<(PathBuf, &'static str)>,
    /// One run at a time: runs share the jail and the account.
    lock: Mutex<()>,
}

/// Directories of the jail; `true`: the line may write there.
const DIRS: &[(&str, bool)] = &[
    ("usr", false),
    ("usr/bin", false),
    ("usr/sbin", false),
    ("usr/lib", false),
    ("usr/lib64", false),
    ("usr/local", false),
    ("usr/local/bin", false),
    ("usr/local/sbin", false),
    ("usr/share", false),
    (".oracle", false),
    (".oracle/real", false),
    (".oracle/log", true),
    (".oracle/proc", false),
    ("etc", true),
    ("etc/zsh", false),
    ("etc/ssh", true),
    ("etc/ssl", true),
    ("etc/ssl/private", true),
    ("etc/nginx", true),
    ("etc/systemd", true),
    ("etc/cron.d", true),
    ("etc/sudoers.d", true),
    ("dev", true),
    ("dev/mapper", true),
    ("dev/disk", true),
    ("dev/disk/by-id", true),
    ("dev/vg0", true),
    ("dev/shm", true),
    ("proc", true),
    ("proc/1", true),
    ("proc/self", true),
    ("proc/sys", true),
    ("proc/sys/kernel", true),
    ("proc/sys/vm", true),
    ("proc/sys/net", true),
    ("sys", true),
    ("sys/kernel", true),
    ("root", true),
    ("root/.ssh", true),
    ("home", false),
    ("home/x", true),
    ("home/x/.ssh", true),
    ("home/x/.kube", true),
    ("home/x/.aws", true),
    ("home/x/.docker", true),
    ("home/x/.config", true),
    ("tmp", true),
    ("var", false),
    ("var/tmp", true),
    ("var/log", true),
    ("var/log/nginx", true),
    ("var/lib", true),
    ("var/www", true),
    ("run", true),
    ("opt", true),
    ("srv", true),
    ("mnt", true),
    ("boot", true),
    ("w", true),
    ("w/sub", true),
];

/// Files the line may overwrite, restored after each run.
const FILES: &[(&str, &str)] = &[
    ("w/a.txt", "a\n"),
    ("w/b.log", "b\n"),
    ("w/c.conf", "c\n"),
    ("w/.hidden", ""),
    ("w/sub/d.txt", "d\n"),
    (
        "etc/passwd",
        "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nx:x:1000:1000:x:/home/x:/bin/bash\n",
    ),
    ("etc/group", "root:x:0:\nnogroup:x:65534:\nx:x:1000:\n"),
    ("etc/hostname", "jail\n"),
    ("etc/shadow", ""),
    ("etc/shadow-", ""),
    ("etc/ssh/ssh_host_ed25519_key", ""),
    ("etc/ssh/ssh_host_ed25519_key.pub", ""),
    ("home/x/.ssh/id_ed25519", ""),
    ("home/x/.ssh/id_ed25519.pub", ""),
    ("root/.ssh/authorized_keys", ""),
    ("var/log/syslog", ""),
    ("var/log/nginx/access.log", ""),
    ("var/log/nginx/error.log", ""),
    ("etc/hosts", "127.0.0.1 localhost\n"),
    ("etc/os-release", "ID=debian\n"),
    ("etc/resolv.conf", ""),
    ("etc/nginx/nginx.conf", ""),
    ("proc/1/environ", ""),
    ("proc/self/environ", ""),
    ("proc/loadavg", ""),
    ("proc/meminfo", ""),
    ("tmp/img", ""),
    ("tmp/layout", ""),
    ("dev/null", ""),
];

impl Oracle {
    /// None (and a note on stderr) when this machine cannot build a jail
    /// (not root, no user namespaces, bash missing). dash and zsh are
    /// optional: see [`Oracle::has`].
    /// `integration`: the shell integration typed runs go through (none:
    /// [`Oracle::run_typed`] refuses).
    pub fn new(integration: Option<Integration>) -> Option<Oracle> {
        match Oracle::build(true, integration) {
            Ok(o) => Some(o),
            Err(e) => {
                eprintln!("oracle: no jail on this machine ({e}); skipping");
                None
            }
        }
    }

    /// `namespaces: false` builds the fallback for machines that allow
    /// none (root only): a subreaper and a sweep by account instead.
    fn build(namespaces: bool, integration: Option<Integration>) -> Result<Oracle, String> {
        let euid = unsafe { libc::geteuid() };
        let account = if euid == 0 {
            let n = NEXT_UID.fetch_add(1, Ordering::Relaxed) % 64;
            let pid = std::process::id() % 65536;
            Account::Root {
                uid: JAIL_UID_BASE + pid * 64 + n,
            }
        } else {
            Account::UserNs {
                outer_uid: euid,
                outer_gid: unsafe { libc::getegid() },
            }
        };
        let dir = tempfile::Builder::new()
            .prefix("walissh-oracle-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let base = dir.path().canonicalize().map_err(|e| e.to_string())?;
        let root = base.join("root");
        let output = base.join("output");
        let script = integration.as_ref().map_or("", |i| i.script.as_str());
        let shells =
            build_jail(&root, &typed_rc(script)).map_err(|e| format!("building the jail: {e}"))?;
        if !shells[Shell::Bash.index()] {
            return Err("bash or dash not found".into());
        }
        let mut writable = Vec::new();
        for (path, w) in std::iter::once(&("", true)).chain(DIRS) {
            if *w {
                let p = root.join(path);
                let names = fs::read_dir(&p)
                    .map_err(|e| e.to_string())?
                    .filter_map(|e| e.ok().map(|e| e.file_name()))
                    .collect();
                writable.push((p, names));
            }
        }
        let pristine = FILES.iter().map(|(p, c)| (root.join(p), *c)).collect();
        let mut oracle = Oracle {
            _dir: dir,
            root,
            output,
            account,
            integration,
            clone_flags: 0,
            shells,
            timeout: TIMEOUT,
            writable,
            pristine,
            lock: Mutex::new(()),
        };
        // The namespaces this machine allows, tried with a real run.
        let candidates: &[libc::c_int] = match account {
            Account::Root { .. } if !namespaces => &[0],
            Account::Root { .. } => &[
                libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWNS,
                libc::CLONE_NEWPID | libc::CLONE_NEWNS,
                libc::CLONE_NEWPID,
                0,
            ],
            Account::UserNs { .. } => &[
                libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWNS,
                libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS,
                libc::CLONE_NEWUSER | libc::CLONE_NEWPID,
            ],
        };
        let mut last = String::new();
        for &flags in candidates {
            oracle.clone_flags = flags;
            match oracle.run(Shell::Bash, "echo ok") {
                Ok(r) if r == [vec!["echo".to_string(), "ok".to_string()]] => return Ok(oracle),
                Ok(r) => last = format!("a trial run reported {r:?}"),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Copies this machine's real `name`, and the libraries `ldd` lists
    /// for it, into the jail beside the real shells; returns its path
    /// there (`/.oracle/real/NAME`). None when there is no such program
    /// or it is not a dynamic executable (a script needs other programs,
    /// and every other program here is a stub). The line cannot write
    /// it, and runs it with the jail's limits, as it runs the shells: a
    /// real program given an option that writes writes inside the jail.
    pub fn install(&self, name: &str) -> Option<String> {
        let exe = find_program(name)?;
        let needed = ldd(&exe)?;
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let copy = |from: &Path, to: &Path| -> io::Result<()> {
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent)?;
            }
            if !to.exists() {
                copy_program(from, to)?;
            }
            Ok(())
        };
        for lib in needed {
            copy(&lib, &self.root.join(lib.strip_prefix("/").unwrap_or(&lib))).ok()?;
        }
        let inside = format!("/.oracle/real/{name}");
        copy(&exe, &self.root.join(&inside[1..])).ok()?;
        Some(inside)
    }

    /// Whether `shell` is installed (bash always is, or there is no oracle).
    pub fn has(&self, shell: Shell) -> bool {
        self.shells[shell.index()]
    }

    /// The bound on a run ([`TIMEOUT`] unless changed).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Runs `line` with `shell` (as `SHELL -c LINE`, non-interactive, no rc
    /// files) inside the jail. Returns the argv of every program the line
    /// ran, in the order they started (argv\[0] as the basename of what was
    /// invoked), or Err if the run did not finish within the bound (it was
    /// killed) or the jail failed.
    pub fn run(&self, shell: Shell, line: &str) -> Result<Vec<Vec<String>>, String> {
        self.run_with_output(shell, line).map(|(argvs, _)| argvs)
    }

    /// [`Oracle::run`], with what the shells wrote to stdout and stderr
    /// (errors such as `command not found`; stubs print nothing).
    pub fn run_with_output(
        &self,
        shell: Shell,
        line: &str,
    ) -> Result<(Vec<Vec<String>>, String), String> {
        if !self.has(shell) {
            return Err(format!("{} is not installed", shell.name()));
        }
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.run_locked(shell, line);
        let output = fs::read(&self.output).unwrap_or_default();
        let records = self.records();
        self.clean();
        let output = String::from_utf8_lossy(&output).into_owned();
        match result {
            Ok(()) => Ok((records, output)),
            Err(e) => Err(format!(
                "{e} ({} programs had started; output: {})",
                records.len(),
                &output[..output.floor_char_boundary(400)]
            )),
        }
    }

    /// Types `line` into an interactive bash on a terminal, as the agent
    /// types an approved command: walissh's shell integration installed
    /// (its keys bound), a fresh prompt waited for, then Ctrl-E Ctrl-U,
    /// the line as a bracketed paste, walissh's own Enter; `exit` at the
    /// next prompt. Returns what ran, as [`Oracle::run`] does (`printf`
    /// stays a builtin here: the integration needs it).
    pub fn run_typed(&self, line: &str) -> Result<Vec<Vec<String>>, String> {
        if self.integration.is_none() {
            return Err("no shell integration was given for typed runs".into());
        }
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.run_plan(Plan::with(self, Shell::Bash, line, true)?, Some(line));
        let records = self.records();
        self.clean();
        result.map(|()| records)
    }

    fn run_locked(&self, shell: Shell, line: &str) -> Result<(), String> {
        self.run_plan(Plan::new(self, shell, line)?, None)
    }

    /// Runs `plan`; with `typed`, on a terminal that gets that line.
    fn run_plan(&self, plan: Plan, typed: Option<&str>) -> Result<(), String> {
        let out = fs::File::create(&self.output).map_err(|e| e.to_string())?;
        let null = fs::File::open("/dev/null").map_err(|e| e.to_string())?;
        let tty = match (typed, &self.integration) {
            (Some(line), Some(i)) => Some(Terminal::open(line, i)?),
            _ => None,
        };
        let mut fds = [0 as libc::c_int; 2];
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error().to_string());
        }
        let (report_r, report_w) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let fds = match &tty {
            Some(t) => Fds {
                out: t.slave.as_ref().map_or(-1, |s| s.as_raw_fd()),
                null: t.slave.as_ref().map_or(-1, |s| s.as_raw_fd()),
                report: report_w.as_raw_fd(),
                tty: true,
            },
            None => Fds {
                out: out.as_raw_fd(),
                null: null.as_raw_fd(),
                report: report_w.as_raw_fd(),
                tty: false,
            },
        };
        // SAFETY: the child only makes system calls on memory prepared
        // above (no allocation, no lock), then execs or _exits.
        let pid = unsafe { raw_fork(self.clone_flags) };
        if pid < 0 {
            return Err(format!("clone: {}", io::Error::last_os_error()));
        }
        if pid == 0 {
            unsafe { init_main(&plan, &fds) }
        }
        drop(report_w);
        let mut tty = tty.map(|mut t| {
            t.close_slave();
            t
        });
        let deadline = Instant::now() + self.timeout;
        let mut nap = Duration::from_micros(100);
        let mut timed_out = false;
        loop {
            if let Some(t) = tty.as_mut() {
                t.drive();
            }
            let mut status = 0;
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid || (r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
            {
                break;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                if let (0, Account::Root { uid }) =
                    (self.clone_flags & libc::CLONE_NEWPID, self.account)
                {
                    // No namespace dies with the init: kill the account's
                    // processes while the init is there to reap them.
                    sweep(uid);
                    let grace = Instant::now() + Duration::from_secs(1);
                    while Instant::now() < grace
                        && unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    while libc::waitpid(pid, &mut status, 0) < 0
                        && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
                    {
                    }
                }
                break;
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(2));
        }
        let mut report = Vec::new();
        let _ = fs::File::from(report_r).read_to_end(&mut report);
        if report.len() >= 8 {
            let step = i32::from_ne_bytes(report[0..4].try_into().unwrap());
            let errno = i32::from_ne_bytes(report[4..8].try_into().unwrap());
            return Err(format!(
                "jail setup failed at {}: {}",
                STEPS.get(step as usize).unwrap_or(&"?"),
                io::Error::from_raw_os_error(errno)
            ));
        }
        if timed_out {
            let shown = tty.as_ref().map_or(String::new(), |t| {
                let tail = &t.seen[t.seen.len().saturating_sub(600)..];
                format!(
                    " ({:?}; the terminal showed {:?})",
                    t.stage,
                    String::from_utf8_lossy(tail)
                )
            });
            return Err(format!("timed out after {:?}: killed{shown}", self.timeout));
        }
        if let Some(t) = tty
            && t.stage != Stage::Done
        {
            return Err(format!(
                "the typed line never came back to a prompt ({:?}); the terminal showed {:?}",
                t.stage,
                String::from_utf8_lossy(&t.seen[t.seen.len().saturating_sub(600)..])
            ));
        }
        Ok(())
    }

    /// The records of the run, in the order they were claimed.
    fn records(&self) -> Vec<Vec<String>> {
        let log = self.root.join(".oracle/log");
        let mut files: Vec<(u64, PathBuf)> = fs::read_dir(&log)
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let e = e.ok()?;
                let n = e.file_name().to_str()?.parse().ok()?;
                Some((n, e.path()))
            })
            .collect();
        files.sort();
        let mut records = Vec::new();
        for (_, path) in files {
            let Ok(bytes) = fs::read(&path) else { continue };
            // A record cut short (its stub killed mid-write) is dropped.
            let Some(body) = bytes.strip_suffix(b"\0\n") else {
                continue;
            };
            records.push(
                body.split(|&b| b == 0)
                    .map(|f| String::from_utf8_lossy(f).into_owned())
                    .collect(),
            );
        }
        records
    }

    /// Puts the jail back as it was built.
    fn clean(&self) {
        for (dir, names) in &self.writable {
            let Ok(entries) = fs::read_dir(dir) else {
                continue;
            };
            for e in entries.flatten() {
                if names.contains(&e.file_name()) {
                    continue;
                }
                let p = e.path();
                let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                let _ = if is_dir {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
            }
        }
        for (path, content) in &self.pristine {
            if fs::read(path).ok().as_deref() != Some(content.as_bytes()) {
                let _ = fs::remove_file(path);
                let _ = fs::write(path, content);
            }
            let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o666));
        }
        let _ = fs::write(&self.output, b"");
    }

    /// Processes still running in the jail (there should be none between
    /// runs): those whose root is the jail, or that run as its account.
    pub fn leftovers(&self) -> Vec<i32> {
        let uid = match self.account {
            Account::Root { uid } => Some(uid),
            Account::UserNs { .. } => None,
        };
        processes_of(uid, Some(&self.root), true)
    }
}

pub mod conformance;
mod jail;
mod spawn;
#[cfg(test)]
mod tests;

use jail::*;
use spawn::*;
