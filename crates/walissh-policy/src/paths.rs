//! What the policy knows about paths: their normal form (`//`, `/./` and
//! `..` taken out, as the kernel would for a path without symlinks), the
//! places where secrets live, the top-level system directories, and block
//! devices. What it leaves to others: which operands are paths (`auto`,
//! `deny`).

/// `path` with repeated slashes, `.` and `..` taken out. A relative path
/// stays relative (leading `..` kept); `/..` is `/`.
pub(crate) fn normalise(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Directories under `/` that a recursive delete, chmod or chown must
/// never touch, and `/` itself.
const SYSTEM_DIRS: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "opt", "proc", "root",
    "run", "sbin", "srv", "sys", "usr", "var", "mnt", "media", "snap", "nix",
];

/// Whether `path` is `/`, a top-level system directory, or one of the
/// directories of `/usr` and `/var` that hold the system (`/usr/bin`,
/// `/var/lib`), however spelled. A trailing `/*` counts as the directory.
pub(crate) fn is_system_dir(path: &str) -> bool {
    let path = match path.strip_suffix("/*") {
        Some("") => "/",
        Some(dir) => dir,
        None => path,
    };
    if !path.starts_with('/') {
        return false;
    }
    let n = normalise(path);
    let parts: Vec<&str> = n.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [] => true,
        [top] => SYSTEM_DIRS.contains(top),
        ["usr" | "var", second] => !matches!(*second, "tmp" | "log" | "cache" | "mail"),
        ["usr", "local", _] => true,
        _ => false,
    }
}

/// Device names of disks and their parts, LVM and device-mapper volumes,
/// raw memory.
pub(crate) fn is_block_device(path: &str) -> bool {
    let n = normalise(path);
    let Some(dev) = n.strip_prefix("/dev/") else {
        return false;
    };
    const PREFIXES: &[&str] = &[
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "dm-", "md", "loop", "nbd", "rbd", "zd", "sr",
        "disk/", "mapper/", "mem", "kmem", "port", "root", "mtd", "pmem", "drbd", "bcache",
        "emcpower", "dasd", "sg", "ram", "zram", "ubi", "nvram", "block/", "cciss/", "ataraid/",
    ];
    let floppy = dev
        .strip_prefix("fd")
        .is_some_and(|n| n.bytes().next().is_some_and(|b| b.is_ascii_digit()));
    // LVM volumes are /dev/VG/LV: any two-level name that is not one of
    // the kernel's own directories.
    let lvm = dev.split('/').count() == 2
        && ![
            "pts",
            "shm",
            "mqueue",
            "hugepages",
            "net",
            "input",
            "snd",
            "bus",
            "char",
            "block",
        ]
        .iter()
        .any(|d| dev.starts_with(&format!("{d}/")));
    PREFIXES.iter().any(|p| dev.starts_with(p)) || lvm || floppy
}

/// Components that mark a directory of secrets wherever it is.
const SECRET_DIRS: &[&str] = &[
    ".ssh",
    "kubernetes.io~secret",
    "kubernetes.io~projected",
    "credstore",
    "credstore.encrypted",
    "system-connections",
    ".vnc",
    "gitlab-runner",
    "rancher",
    "dropbear",
    "tinc",
    "ceph",
    ".terraform.d",
    "containers",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".vault",
    "gcloud",
    "private",
    "secrets",
    "letsencrypt",
    "wireguard",
    "pki",
    "keys",
    ".cert",
    "credentials",
    "etcd",
    "krb5kdc",
    "netplan",
    "openvpn",
    "waagent",
    ".mozilla",
    "auth.conf.d",
];

/// Exact names of files that hold secrets.
const SECRET_NAMES: &[&str] = &[
    ".netrc",
    // What a home's editor and pager keep of what was typed, wherever
    // the home is.
    ".viminfo",
    ".lesshst",
    "k3s.yaml",
    "hosts.yml",
    "auth.conf",
    "auth.json",
    "tailscaled.state",
    ".smbcredentials",
    "config.v2.json",
    "user-data",
    "user-data.txt",
    "user_data",
    "_netrc",
    ".pgpass",
    ".my.cnf",
    "debian.cnf",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".dockercfg",
    ".boto",
    ".s3cfg",
    ".vault-token",
    ".mc",
    "credentials",
    "credentials.json",
    "config.json",
    "environ",
    "opasswd",
    "wp-config.php",
    "krb5.keytab",
    "kubeconfig",
    "admin.conf",
    "authinfo",
    ".authinfo",
    "master.key",
    ".erlang.cookie",
    "userlist.txt",
    "database.yml",
    "secrets.yml",
    "ovf-env.xml",
    "authkey",
    "auth.txt",
    ".msmtprc",
    "msmtprc",
    "logins.json",
    "key4.db",
    "cloud-config.txt",
    "nslcd.conf",
    "settings.xml",
    "clouds.yaml",
    "hostapd.conf",
    "principal",
    "ddclient.conf",
    "random-seed",
    "wpa_supplicant.conf",
    "ldap.secret",
    "pam_ldap.conf",
];

/// Endings of key and keystore files.
const SECRET_SUFFIXES: &[&str] = &[
    ".priv",
    ".p8",
    ".key",
    ".pem",
    ".p12",
    ".pfx",
    ".jks",
    ".keystore",
    ".ppk",
    ".keytab",
    ".kdbx",
    ".gpg",
    ".asc",
    ".ovpn",
    ".age",
    ".htpasswd",
    "_history",
    ".psk",
    ".crt.key",
    ".secret",
    ".token",
    ".tfstate",
    ".tfstate.backup",
    ".tfvars",
    ".netdev",
    ".cookie",
];

/// Why reading `path` would show a secret, if it would: shadow files and
/// their backups, private keys and key directories, cloud, container and
/// git credentials, `.env` files, shell histories, process environments,
/// raw memory. Relative paths are judged by their components, since the
/// directory they are in is not known here. The model errs towards
/// asking: a certificate ending in `.pem` asks too.
pub(crate) fn secret(path: &str) -> Option<&'static str> {
    // `..` is taken off by text here, while the kernel takes it after a
    // symlink (`/var/run/../root` is `/root`): such a path cannot be
    // judged by name.
    if path.split('/').any(|c| c == "..") {
        return Some("a path that climbs (through a symlink it leads elsewhere)");
    }
    let n = match through_proc(path) {
        Ok(n) => n,
        Err(what) => return Some(what),
    };
    let name = n.rsplit('/').next().unwrap_or(&n);
    // A backup is what it backs up: `server.key.bak`, `id_rsa~`, `.netrc.1`.
    let lower = without_backup(&name.to_ascii_lowercase());
    let public = lower.ends_with(".pub")
        || lower.starts_with("known_hosts")
        || lower.starts_with("authorized_keys");
    let components: Vec<&str> = n.split('/').collect();
    let dirs = &components[..components.len().saturating_sub(1)];
    if lower.starts_with("shadow")
        || lower.starts_with("gshadow")
        || lower.starts_with("master.passwd")
    {
        return Some("a shadow password file");
    }
    if let Some(what) = kernel(&n, &components) {
        return Some(what);
    }
    if hidden_by_the_sandbox(&n) {
        return Some("a place the sandbox hides");
    }
    if is_block_device(&n) {
        return Some("a disk or memory device");
    }
    // Other devices stream without end (`/dev/urandom`) or read hardware.
    if n.starts_with("/dev/") && !matches!(n.as_str(), "/dev/null" | "/dev/stdin") {
        return Some("a device");
    }
    if public {
        return None;
    }
    if lower.starts_with("id_") || lower.starts_with("ssh_host_") || lower.contains("host_key") {
        return Some("a private key");
    }
    if lower.starts_with(".env") || lower.ends_with(".env") {
        return Some("an environment file");
    }
    // `passwd` is a secret everywhere but /etc (`~/.vnc/passwd`).
    let passwd = lower.contains("passwd") && !matches!(n.as_str(), "/etc/passwd" | "/etc/passwd-");
    let named = [
        "secret",
        "token",
        "password",
        "credential",
        "history",
        "histfile",
        "keyring",
    ];
    if named.iter().any(|w| lower.contains(w)) || passwd {
        return Some("a file named for secrets");
    }
    if SECRET_DIRS.contains(&lower.as_str()) {
        return Some("a directory of secrets");
    }
    if SECRET_NAMES.contains(&lower.as_str()) {
        return Some("a credentials file");
    }
    if SECRET_SUFFIXES.iter().any(|s| lower.ends_with(s)) {
        return Some("a key or credentials file");
    }
    if dirs
        .iter()
        .any(|d| SECRET_DIRS.contains(&d.to_ascii_lowercase().as_str()))
    {
        return Some("a file in a directory of secrets");
    }
    None
}

/// The paths hidden from a sandboxed command (an empty directory or file
/// in their place), as globs: `*` within one component, `~` the target
/// account's home; `[ai] sandbox_hide` adds more. The secret check here
/// matches the same list, so either wall alone keeps them from a line
/// that runs unasked. walissh's sandbox (`upstream::sandbox`) re-exports
/// it.
pub const HIDDEN: &[&str] = &[
    // Passwords and host keys.
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
    "/etc/ssh/*_key",
    // Whole places of secrets.
    "/root",
    "/run/secrets",
    "/var/run/secrets",
    "/etc/kubernetes",
    "/etc/rancher",
    "/var/lib/kubelet/pki",
    // Pods' volumes: secrets, service-account tokens and projected
    // credentials are files there (`kubernetes.io~secret/...`).
    "/var/lib/kubelet/pods",
    "/etc/wireguard",
    "/etc/ssl/private",
    "/etc/letsencrypt",
    "/etc/ipsec.secrets",
    "/etc/ipsec.d/private",
    "/etc/krb5.keytab",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/var/lib/iwd",
    "/etc/sssd",
    "/var/lib/sss",
    "/var/spool/cron",
    "/var/spool/cron/crontabs",
    "/var/lib/tor",
    "/var/lib/cloud/instance/user-data.txt",
    "/var/lib/cloud/instance/user-data.txt.i",
    "/var/lib/cloud/instances/*/user-data.txt",
    "/var/lib/cloud/instances/*/user-data.txt.i",
    // The vendor's part of user-data, and cloud-init's pickled copy of
    // all of it.
    "/var/lib/cloud/instances/*/vendor-data.txt",
    "/var/lib/cloud/instance/vendor-data2.txt",
    "/var/lib/cloud/instances/*/vendor-data2.txt",
    "/var/lib/cloud/instance/obj.pkl",
    "/var/lib/cloud/instances/*/obj.pkl",
    "/var/lib/cloud/instance/vendor-data.txt",
    "/run/cloud-init/instance-data-sensitive.json",
    "/var/lib/cloud/instance/sensitive",
    "/etc/mysql/debian.cnf",
    // A password in the file: iSCSI CHAP, pam_ldap's bindpw, Redis's
    // requirepass and masterauth.
    "/etc/iscsi/iscsid.conf",
    "/etc/ldap.conf",
    "/etc/redis",
    "/etc/postfix/sasl_passwd",
    "/etc/postfix/sasl_passwd.db",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/etc/docker/key.json",
    "/var/lib/docker/containers",
    "/etc/containers/auth.json",
    "/run/containers/*/auth.json",
    "/etc/gitlab-runner",
    "/etc/cups/ssl",
    "/var/lib/private",
    "/var/lib/etcd",
    "/var/lib/krb5kdc",
    "/etc/krb5kdc",
    "/var/lib/rabbitmq/.erlang.cookie",
    "/var/lib/waagent",
    "/var/lib/cloud/instance/scripts",
    "/var/lib/cloud/instances/*/scripts",
    "/var/lib/cloud/instance/cloud-config.txt",
    "/var/lib/cloud/instances/*/cloud-config.txt",
    "/var/lib/systemd/random-seed",
    "/etc/netplan",
    "/etc/apt/auth.conf.d",
    "/etc/openvpn",
    "/etc/corosync/authkey",
    "/etc/pgbouncer/userlist.txt",
    "/etc/dovecot/users",
    "/etc/hostapd",
    "/etc/ddclient.conf",
    "/etc/nslcd.conf",
    "/etc/openstack",
    "/etc/systemd/network/*.netdev",
    // An automounter's host map looks up whatever name is asked for under
    // it, outside the sandbox's network namespace.
    "/net",
    // Sockets of daemons that act as root for whoever connects (a
    // read-only file system does not stop a connect): container runtimes,
    // virtualisation, snapd.
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/crio",
    "/run/k3s",
    "/run/libvirt",
    "/var/run/libvirt",
    "/run/snapd.socket",
    "/run/snapd-snap.socket",
    "/var/snap/lxd/common/lxd/unix.socket",
    "/run/user/*/docker.sock",
    "/run/user/*/podman",
    // The journal's and syslog's inputs: a line written there is a write
    // (a forged log line).
    "/run/systemd/journal/socket",
    "/run/systemd/journal/stdout",
    "/run/systemd/journal/dev-log",
    "/dev/log",
    // Every home's credentials, the account's own wherever its home is.
    "/home/*/.ssh",
    "/home/*/.gnupg",
    "/home/*/.aws",
    "/home/*/.azure",
    "/home/*/.kube",
    "/home/*/.docker",
    "/home/*/.config/gcloud",
    "/home/*/.config/rclone",
    "/home/*/.config/sops",
    "/home/*/.config/gh",
    "/home/*/.password-store",
    "/home/*/.mozilla",
    "/home/*/.msmtprc",
    "/home/*/.m2/settings.xml",
    "/home/*/.netrc",
    "/home/*/.pgpass",
    "/home/*/.my.cnf",
    "/home/*/.git-credentials",
    "/home/*/.vault-token",
    "/home/*/.*_history",
    "/home/*/.viminfo",
    "/home/*/.lesshst",
    "/home/*/.local/share/keyrings",
    "~/.ssh",
    "~/.mozilla",
    "~/.msmtprc",
    "~/.m2/settings.xml",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.kube",
    "~/.docker",
    "~/.config/gcloud",
    "~/.config/rclone",
    "~/.config/sops",
    "~/.config/gh",
    "~/.password-store",
    "~/.netrc",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.git-credentials",
    "~/.vault-token",
    "~/.*_history",
    "~/.viminfo",
    "~/.lesshst",
    "~/.local/share/keyrings",
];

/// Whether the absolute path `n` is, or is under, a path the sandbox
/// hides ([`HIDDEN`]): the same list, so either wall
/// alone stops the read. `~` is any home, root's included.
fn hidden_by_the_sandbox(n: &str) -> bool {
    use std::sync::OnceLock;
    static PATTERNS: OnceLock<Vec<glob::Pattern>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| hiding(HIDDEN.iter().copied()));
    under(n, patterns)
}

/// Sandbox globs as patterns of absolute paths: `~/` is every home,
/// root's included.
pub(crate) fn hiding<'a>(globs: impl Iterator<Item = &'a str>) -> Vec<glob::Pattern> {
    globs
        .flat_map(|g| match g.strip_prefix("~/") {
            Some(rest) => vec![format!("/home/*/{rest}"), format!("/root/{rest}")],
            None => vec![g.to_string()],
        })
        .filter_map(|g| glob::Pattern::new(&g).ok())
        .collect()
}

/// Whether the absolute path `n`, or a directory above it, matches one of
/// `patterns`.
pub(crate) fn under(n: &str, patterns: &[glob::Pattern]) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    if !n.starts_with('/') {
        return false;
    }
    let mut at = n;
    loop {
        if patterns.iter().any(|p| p.matches_with(at, options)) {
            return true;
        }
        match at.rfind('/') {
            Some(0) | None => return false,
            Some(i) => at = &at[..i],
        }
    }
}

/// `/proc/PID/root/etc/shadow` is `/etc/shadow`; `/proc/PID/cwd/…` and
/// `/proc/PID/fd/N` are another process's files, which cannot be judged
/// by name.
fn through_proc(path: &str) -> Result<String, &'static str> {
    let n = normalise(path);
    let parts: Vec<&str> = n.splitn(5, '/').collect();
    match parts.as_slice() {
        ["", "proc", _, "root"] => Ok("/".into()),
        ["", "proc", _, "root", rest] => Ok(normalise(&format!("/{rest}"))),
        ["", "proc", _, "cwd" | "fd" | "map_files" | "exe", ..] => Err("another process's files"),
        _ => Ok(n),
    }
}

/// What the kernel shows that is a secret or never ends: a process's
/// memory, environment and command line, `kcore`, `kmsg`, the tracing
/// pipes.
fn kernel(n: &str, components: &[&str]) -> Option<&'static str> {
    if let Some(rest) = n.strip_prefix("/proc/") {
        let under_pid = components.get(2).is_some_and(|p| {
            p.bytes().all(|b| b.is_ascii_digit()) || matches!(*p, "self" | "thread-self")
        });
        let name = rest.rsplit('/').next().unwrap_or(rest);
        // Of a process's files, only these describe it without showing
        // what it holds.
        const SAFE: &[&str] = &[
            "status",
            "stat",
            "statm",
            "limits",
            "cgroup",
            "io",
            "oom_score",
            "oom_score_adj",
            "sched",
            "wchan",
            "comm",
            "mountinfo",
            "mounts",
            "ns",
            "task",
        ];
        if under_pid && components.len() > 3 && !SAFE.contains(&name) {
            return Some("a process's memory, environment or files");
        }
        if matches!(name, "kcore" | "kmsg" | "kallsyms") {
            return Some("kernel memory or messages");
        }
    }
    if n.starts_with("/proc/sys/") && (n.contains("key") || n.contains("secret")) {
        return Some("a kernel key (TCP Fast Open's, IPv6's stable secret)");
    }
    if n.starts_with("/sys/kernel/debug") || n.starts_with("/sys/kernel/tracing") {
        return Some("kernel tracing");
    }
    None
}

/// `name` without the endings editors and package managers give backups.
fn without_backup(name: &str) -> String {
    const ENDINGS: &[&str] = &[
        "~",
        ".bak",
        ".old",
        ".orig",
        ".save",
        ".swp",
        ".tmp",
        ".backup",
        ".dpkg-old",
        ".dpkg-dist",
        ".dpkg-new",
        ".dpkg-bak",
        ".rpmsave",
        ".rpmnew",
        ".ucf-old",
        ".ucf-dist",
    ];
    let mut n = name.to_string();
    loop {
        let before = n.len();
        for e in ENDINGS {
            if let Some(s) = n.strip_suffix(e) {
                n = s.to_string();
            }
        }
        // `.1`, `.2.gz`: rotated copies.
        if let Some((stem, tail)) = n.rsplit_once('.')
            && !stem.is_empty()
            && (tail.bytes().all(|b| b.is_ascii_digit()) || tail == "gz")
        {
            n = stem.to_string();
        }
        if n.len() == before || n.is_empty() {
            return n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalised() {
        for (p, n) in [
            ("//etc//", "/etc"),
            ("/./etc/./", "/etc"),
            ("/etc/..", "/"),
            ("/../..", "/"),
            ("/usr/../etc/nginx/..", "/etc"),
            ("a/../../b", "../b"),
            ("./x", "x"),
            (".", "."),
        ] {
            assert_eq!(normalise(p), n, "{p}");
        }
    }

    #[test]
    fn system_directories_however_spelled() {
        for p in [
            "/",
            "//",
            "/.",
            "/etc",
            "/etc/",
            "/./etc",
            "/tmp/../etc",
            "/*",
            "/usr/*",
            "/usr/bin",
            "/var/lib",
            "/home",
        ] {
            assert!(is_system_dir(p), "{p}");
        }
        for p in [
            "/tmp/build",
            "/srv/app",
            "/var/log",
            "/var/tmp",
            "build",
            "/etc/nginx",
            "/home/alice",
        ] {
            assert!(!is_system_dir(p), "{p}");
        }
    }

    #[test]
    fn block_devices() {
        for p in [
            "/dev/sda",
            "/dev/sda1",
            "/dev/nvme0n1",
            "/dev/vdb",
            "/dev/xvda",
            "/dev/dm-0",
            "/dev/md0",
            "/dev/mapper/root",
            "/dev/vg0/lv0",
            "//dev/./sda",
            "/dev/disk/by-id/x",
        ] {
            assert!(is_block_device(p), "{p}");
        }
        for p in [
            "/dev/null",
            "/dev/zero",
            "/dev/urandom",
            "/dev/pts/0",
            "/dev/tty",
            "/tmp/sda",
        ] {
            assert!(!is_block_device(p), "{p}");
        }
    }

    #[test]
    fn secrets() {
        for p in [
            "/etc/shadow",
            "/etc/shadow-",
            "/etc/gshadow",
            "//etc/./shadow",
            "/etc/ssh/ssh_host_ed25519_key",
            "/root/.ssh/id_rsa",
            "/root/.ssh/config",
            ".ssh/id_ed25519",
            "/home/a/.aws/credentials",
            "/home/a/.kube/config",
            "/home/a/.docker/config.json",
            "/srv/app/.env",
            "/srv/app/.env.production",
            "/etc/ssl/private/site.key",
            "/etc/letsencrypt/live/x/privkey.pem",
            "/proc/1/environ",
            "/proc/self/environ",
            "/root/.bash_history",
            "/home/a/.pgpass",
            "/home/a/.netrc",
            "/home/a/.git-credentials",
            "/home/a/.config/gcloud/access_tokens.db",
            "/etc/wireguard/wg0.conf",
            "/run/secrets/db",
            "/var/run/secrets/kubernetes.io/serviceaccount/token",
            "/etc/ipsec.secrets",
            "key.ppk",
            "/etc/krb5.keytab",
            "/dev/mem",
            "/etc/nginx/.htpasswd",
        ] {
            assert!(secret(p).is_some(), "{p}");
        }
        for p in [
            "/etc/passwd",
            "/etc/hosts",
            "/var/log/syslog",
            "/etc/nginx/nginx.conf",
            "/etc/ssh/ssh_host_ed25519_key.pub",
            "/srv/keys.d/id_rsa.pub",
            "/proc/meminfo",
            "/proc/1/status",
            "/etc/os-release",
        ] {
            assert_eq!(secret(p), None, "{p}");
        }
        // Public, but where the sandbox hides them: reading them unasked
        // would find nothing, so it is asked, and runs in the user's shell.
        for p in [
            "/root/.ssh/id_rsa.pub",
            "/home/alice/.ssh/known_hosts",
            "/root/.bash_history",
            "/etc/wpa_supplicant/wpa_supplicant.conf",
            "/var/spool/cron/crontabs/root",
            "/etc/sssd/sssd.conf",
        ] {
            assert_eq!(secret(p), Some("a place the sandbox hides"), "{p}");
        }
    }
}
