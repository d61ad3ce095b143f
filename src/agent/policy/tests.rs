//! The policy as a whole: the old rules' cases, the adversarial corpus
//! and the diagnostic list (tests/policy/), and what the `Run?` prompt
//! lists.

use super::*;

fn verdict(cmd: &str, mode: AiMode) -> Verdict {
    let deny = ["*curl*|*sh".to_string(), "iptables -F*".to_string()];
    Policy::new(&deny, &["?".to_string()], false).check(cmd, mode)
}

fn denied(cmd: &str) -> bool {
    matches!(verdict(cmd, AiMode::Auto), Verdict::Deny(_))
}

#[test]
fn destructive_commands_are_denied_wherever_they_hide() {
    for cmd in [
        "rm -rf /",
        "rm -fr /*",
        "sudo rm -r --no-preserve-root /",
        "ls; rm -rf /etc",
        "true && rm -Rf /usr/",
        "echo $(rm -rf /var)",
        "echo `rm -rf ~`",
        "cat x | sh -c 'rm -rf /'",
        "find / -name x | xargs rm -rf /",
        "mkfs.ext4 /dev/sda1",
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "shutdown -h now",
        "systemctl reboot",
        "init 0",
        "chmod -R 777 /",
        "chown -R nobody /",
        "echo x > /etc/shadow",
        "echo root::0:0::/:/bin/sh | tee -a /etc/passwd",
        ":(){ :|:& };:",
        "? why",
        "ls\nrm -rf /tmp/x",
        "echo !!",
        "kill -9 -1",
        "iptables -F INPUT",
        "vim /etc/hosts",
        "journalctl -u x | less",
        "sudo top",
        "find / -delete",
    ] {
        assert!(denied(cmd), "{cmd} was not denied");
    }
}

#[test]
fn ordinary_commands_are_not_denied() {
    for cmd in [
        "rm -rf /tmp/build",
        "rm /etc/nginx/sites-enabled/old",
        "ls -la /",
        "chmod -R g+w /srv/app",
        "dd if=/dev/sda of=/tmp/mbr bs=512 count=1",
    ] {
        assert!(!denied(cmd), "{cmd} was denied");
    }
}

#[test]
fn auto_runs_only_read_only_commands() {
    for cmd in [
        "ls -la /var/log",
        "df -h; free -m",
        "ps aux | grep nginx | head -5",
        "systemctl status nginx",
        "journalctl -u nginx -n 50",
        "ip addr show",
        "find /var/log -name '*.gz'",
        "tail -n 100 /var/log/syslog 2>/dev/null",
        "date +%s",
        "hostname -f",
        "ss -tlnp",
        "printf '%s\\n' x",
        "cat /root/.ssh/id_ed25519.pub",
    ] {
        assert!(
            matches!(verdict(cmd, AiMode::Auto), Verdict::Run(_)),
            "{cmd}: {:?}",
            verdict(cmd, AiMode::Auto)
        );
    }
    for cmd in [
        "ls > /tmp/x",
        "echo $(id)",
        "systemctl restart nginx",
        "sudo ls",
        "sort -o out in",
        "curl http://x",
        "ip route add 10.0.0.0/8 dev eth0",
        "printf -v 'a[$(id)]' x",
        "test -v 'a[$(id)]'",
        "hostname evil",
        "date -s 2020-01-01",
        "date 01010000",
        "ss -tK dst 10.0.0.1",
        "cat /etc/shadow",
        "head ~/.ssh/id_ed25519",
        "cat /srv/app/.env",
        "cat /proc/1/environ",
        "printenv",
    ] {
        assert!(
            matches!(verdict(cmd, AiMode::Auto), Verdict::Ask(_)),
            "{cmd}: {:?}",
            verdict(cmd, AiMode::Auto)
        );
    }
}

#[test]
fn confirm_asks_and_off_refuses() {
    assert_eq!(verdict("ls", AiMode::Confirm), Verdict::Ask(vec![]));
    assert!(matches!(verdict("ls", AiMode::Off), Verdict::Deny(_)));
}
