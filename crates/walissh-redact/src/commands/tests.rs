use super::*;

fn rules() -> Commands {
    Commands::load().unwrap()
}

#[test]
fn the_rules_compile() {
    assert!(rules().rules.len() > 20);
}

#[test]
fn commands_that_read_a_secret_store() {
    let c = rules();
    for line in [
        "docker exec api cat /run/secrets/db_password",
        "sudo -u app cat /var/run/secrets/kubernetes.io/serviceaccount/token",
        "kubectl get secret db -o jsonpath='{.data.password}' | base64 -d",
        "kubectl -n prod get secrets/db --output=yaml",
        "vault kv get -field=password secret/db",
        "vault read -field=value secret/x",
        "cat config/master.key",
        "cat /etc/mongod/keyfile",
        "snyk config get api",
        "npm config get //registry.npmjs.org/:_authToken",
        "gh auth token",
        "gcloud auth print-access-token",
        "aws configure get aws_secret_access_key",
        "aws ecr get-login-password --region eu-west-1",
        "op read op://vault/db/password",
        "pass show prod/db",
        "pass prod/db",
        "openssl rand -base64 32",
        "wg genkey",
        "printenv DB_PASSWORD",
        "echo \"$API_TOKEN\"",
        "echo ${GITHUB_PAT}",
        "jq -r .password creds.json",
        "yq '.db.password' values.yaml",
        "ssh db1 'sudo cat /root/.pgpass'",
        "kubectl exec -it api-0 -- sh -c 'cat /var/run/secrets/app/token'",
        "sops -d secrets.enc.yaml",
        "consul keygen",
        "docker swarm join-token -q worker",
        "ceph auth get-key client.admin",
        "psql -tAc \"select rolpassword from pg_authid where rolname='app'\"",
        "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
        "xclip -o -selection clipboard",
        "type %USERPROFILE%\\.sonar\\token.txt",
        "sh -c 'tr \"\\0\" \"\\n\" < /proc/1/environ | grep ^SECRET_KEY= | cut -d= -f2-'",
        "sudo pass show db",
        "base64 -w0 ~/.ssh/deploy_ed25519",
        "cat help /run/secrets/db_password",
        "cat < /run/secrets/db_password",
        "while read -r l; do echo \"$l\"; done < /run/secrets/x",
        "find /run/secrets -type f -exec cat {} +",
        "ls /run/secrets/* | xargs cat",
        "for f in /run/secrets/*; do echo \"$f: $(cat $f)\"; done",
        "python3 -c \"print(open('/run/secrets/db').read())\"",
        "tr -dc A-Za-z0-9 </dev/urandom | head -c 32",
        "php artisan key:generate --show",
        "kubectl get secret db --template='{{.data.password | base64decode}}'",
        "redis-cli get app:db_password",
        "echo ${DB_PASSWORD:-}",
        "echo \"db: $DB_PASSWORD\"",
        "ansible-vault view group_vars/all/vault.yml",
        "cat /etc/rabbitmq/.erlang.cookie",
        "argocd admin initial-password -n argocd",
        "cat /etc/zabbix/zabbix_agentd.psk",
        "cat /proc/2231/environ",
        "cat 配置/密钥.txt",
        "bin/elasticsearch-reset-password -u elastic -b",
        "cat /etc/openvpn/client/auth.txt",
        "kubectl get secret x -o json | jq -r '.data.password' | base64 -d",
        "cat /run/secrets/a | wc -c; cat /run/secrets/b",
        "kubectl get secret x -o json | jq .data",
        "cat /run/secrets/a | tee /dev/stderr | wc -c",
        "cat /run/secrets/a | xargs -t echo | wc -c",
        "kubectl get secret x -o json | jq '.data | debug | keys'",
        "kubectl get secret x -o json | jq '(.data | error), {name}'",
    ] {
        assert!(c.reads_secret(line).is_some(), "{line}");
    }
}

#[test]
fn commands_that_print_no_secret() {
    let c = rules();
    for line in [
        "kubectl get secrets",
        "kubectl describe secret db",
        "vault kv metadata get secret/db",
        "vault status",
        "docker secret ls",
        "ls /run/secrets",
        "cat /etc/passwd",
        "cat ~/.ssh/id_rsa.pub",
        "cat ~/.ssh/known_hosts ~/.ssh/config ~/.ssh/authorized_keys",
        "vault kv get -help",
        "vault help kv",
        "cat /etc/pam.d/common-password",
        "kubectl get secrets -o wide",
        "echo $SSH_AUTH_SOCK $PASSWORD_STORE_DIR",
        "tail -f /var/log/token-renewer.log",
        "openssl s_client -connect h:443 -cert c.pem -key client.key",
        "cat /etc/ssl/certs/site.pem",
        "echo $PATH",
        "echo $PWD $OLDPWD $HOME",
        "pass ls",
        "wg show",
        "aws configure list",
        "git config --get user.email",
        "jq .items[0].metadata.name pods.json",
        "tail -f /var/log/nginx/access.log",
        "rclone config create offsite webdav user backup pass Orchid-63",
        "result=$(cat ~/.vault-token)",
        "PGPASSWORD=\"$(cat /run/secrets/pg)\" psql -c 'select 1'",
        "grep -rn password config/",
        "grep -i token app.log",
        "openssl rsa -in jwt-signing.key -pubout",
        "aws ssm get-parameter --name /shop/prod/scaling",
        "pass show -c infra/core-sw1",
        "kubectl get secret app-env -o json | jq -r '.data | keys[]'",
        "vault token lookup -format=json | jq '.data | {display_name, policies, ttl}'",
        "umask 077; wg genkey | wg pubkey",
        "kubectl get secret x -o json | jq .metadata.name",
        "cat /run/secrets/db_password | wc -c",
        "kubectl -n g get secret a -o jsonpath='{.data.admin-user}'",
        "grep -rEc 'token=[A-Za-z0-9_]{20,}' /var/log/app/",
        "kubectl create secret generic x --from-file=password=./pw.txt -o name",
        "head -3 /var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
    ] {
        assert_eq!(c.reads_secret(line), None, "{line}");
    }
    // The sinks among them are read as sinks, not missed by the rules.
    for (line, sink) in [
        (
            "kubectl get secret app-env -o json | jq -r '.data | keys[]'",
            Sink::Fields,
        ),
        (
            "kubectl get secret x -o json | jq .metadata.name",
            Sink::Fields,
        ),
        ("umask 077; wg genkey | wg pubkey", Sink::PublicKey),
        ("cat /run/secrets/db_password | wc -c", Sink::Count),
        ("cat /run/secrets/db_password | sha256sum", Sink::Digest),
    ] {
        assert_eq!(c.reading(line).and_then(|r| r.sunk), Some(sink), "{line}");
    }
}

#[test]
fn the_output_runs_to_the_next_prompt_of_the_same_shape() {
    let c = rules();
    let text = "root@db1:~# ls\nfile\nroot@db1:~# cat /run/secrets/pw\n  s3cr3t-one\n\n# not a prompt\nroot@db1:~# ls\nafter\n";
    let spans: Vec<&str> = c
        .outputs(text)
        .iter()
        .map(|(r, _)| &text[r.clone()])
        .collect();
    assert_eq!(spans, ["s3cr3t-one", "# not a prompt"]);
    // To the end of the text when no prompt follows.
    // A prompt in a log line is no prompt.
    let text = "Jun  1 web1 sshd[1]: Invalid user $ vault kv get x from 1.2.3.4\nAccepted password for root\n";
    assert!(c.outputs(text).is_empty());
    // A command continued on the lines below.
    let text =
        "$ kubectl get secret db \\\n>   -o jsonpath='{.data.pw}' | base64 -d\ns3cr3t\n$ ls\n";
    let spans: Vec<&str> = c
        .outputs(text)
        .iter()
        .map(|(r, _)| &text[r.clone()])
        .collect();
    assert_eq!(spans, ["s3cr3t"]);
    let text = "$ gh auth token\ngho_abc\n";
    let spans: Vec<&str> = c
        .outputs(text)
        .iter()
        .map(|(r, _)| &text[r.clone()])
        .collect();
    assert_eq!(spans, ["gho_abc"]);
}

#[test]
fn lines_of_a_secret_output_that_show_no_secret_are_left() {
    let c = rules();
    let sifter = |line: &str| {
        let reading = c.reading(line).expect("a secret command");
        c.sifter(line.to_string(), &reading)
    };
    let mut s = sifter("echo ${DB_PASSWORD:-not set}");
    assert!(s.leaves("not set"));
    assert!(s.leaves("Password (will be hidden): "));
    assert!(!s.leaves("hunter2-x9"));
    let mut s = sifter("kubectl config view --raw");
    let ca = format!(
        "    certificate-authority-data: {}",
        "LS0tLS1CRUdJTi".repeat(8)
    );
    assert!(s.leaves(&ca));
    assert!(s.leaves("Q0VSVElGSUNBVEUtLS0tLQ=="));
    assert!(!s.leaves("    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQ=="));
    // A short public field says nothing of the line under it.
    let mut s = sifter("cat /run/secrets/creds");
    assert!(s.leaves("username: bob"));
    assert!(!s.leaves("Hunter2Secret"));
    // Nor does a long one: only a certificate's data wraps.
    let mut s = sifter("cat /run/secrets/creds");
    assert!(s.leaves(&format!(
        "url: https://{}.example.com/login",
        "x".repeat(60)
    )));
    assert!(!s.leaves("Hunter2Secret"));
    // Under a sink, a program's complaint may quote what it read.
    let mut s = sifter("cat /run/secrets/db | wc --files0-from=-");
    assert!(!s.leaves("wc: hunter2-x9: No such file or directory"));
    assert!(s.leaves("0 total"));
    let mut s = sifter("kubectl get secret x -o json | jq '.data.password | keys'");
    assert!(!s.leaves("jq: error (at <stdin>:0): string (\"aHVudGVy...) has no keys"));
    let mut s = sifter("kubectl get secret x -o json | jq -r '.data | keys[]'");
    assert!(s.leaves("password"));
    let mut s = sifter("vault token lookup -format=json | jq '.data | {display_name, ttl}'");
    assert!(s.leaves("  \"display_name\": \"oidc-anna\","));
}

/// What a reader of the code tried: a secret's own line shaped as a
/// bare prompt, git's and kube-ps1's prompts, sinks that write
/// elsewhere on the way, jq flags that pose as the filter.
#[test]
fn attacks_on_the_command_guard() {
    let c = rules();
    let spans = |text: &str| -> Vec<String> {
        c.outputs(text)
            .iter()
            .map(|(r, _)| text[r.clone()].to_string())
            .collect()
    };
    let found = spans("# cat /run/secrets/db\n# rotated 2024-05-01 by ops\nXk9mP2vLq8nR4tZw\n# \n");
    assert!(found.iter().any(|s| s == "Xk9mP2vLq8nR4tZw"), "{found:?}");
    for p in [
        "user@host:~/repo (main|MERGING)$ ",
        "user@host:~/repo (main=)$ ",
        "(⎈|prod:default) user@host:~$ ",
        "(venv) user@host ~/app (main) $ ",
    ] {
        let text = format!("{p}cat /run/secrets/db\nXk9mP2vLq8nR4tZw\n{p}\n");
        assert_eq!(spans(&text), ["Xk9mP2vLq8nR4tZw"], "{p}");
    }
    let long = format!(
        "/var/lib/docker/overlay2/{}/merged/app$ ",
        "ab12".repeat(16)
    );
    let text = format!("{long}cat /run/secrets/db\nXk9mP2vLq8nR4tZw\n");
    assert_eq!(spans(&text), ["Xk9mP2vLq8nR4tZw"]);
    for line in [
        "cat /run/secrets/db | tee /proc/self/fd/2 | wc -c",
        "sed 'w /proc/self/fd/2' /run/secrets/db | wc -c",
        "cat /run/secrets/db | sort -o out | wc -c",
        // (`tee f` may write to a link to the terminal.)
        "wg genkey | tee privatekey | wg pubkey",
        "cat /run/secrets/db | (cat; wc -c)",
        "perl -pe 'print STDERR' /run/secrets/db | wc -c",
        "kubectl get secret db -o json -v=9 | jq keys",
        "kubectl get secret db -o json | jq -r --arg keys x '.data.password'",
        "echo 1 | cat /run/secrets/db | jq -r --rawfile keys /run/secrets/db '$keys'",
    ] {
        assert!(c.reads_secret(line).is_some(), "{line}");
    }
}

#[test]
fn z_os_and_pane_prompts_and_code_that_only_looks_like_one() {
    assert!(prompt("IBMUSER:/u/ibmuser: >cat x.pw").is_some());
    assert!(prompt("| $ cat /run/secrets/x").is_some());
    assert!(prompt("KEY=\"v\"  # note").is_none());
    assert!(prompt("| app | % | caching_sha2_password |").is_none());
    assert_eq!(
        pipelines("a | b; c && d || e & f"),
        ["a | b", " c ", " d ", " e ", " f"]
    );
    assert_eq!(pipelines("sh -c 'a; b' ; c"), ["sh -c 'a; b' ", " c"]);
}

/// A line read again gets the reading it got first, and the lines
/// remembered stay within their bytes, however many new ones come.
#[test]
fn lines_judged_are_remembered_within_a_bound() {
    let c = Commands::load().unwrap();
    let secret = "cat /run/secrets/db_password";
    for _ in 0..2 {
        assert_eq!(
            c.reading(secret)
                .map(|r| c.id(r.rule).to_string())
                .as_deref(),
            Some("secret-file")
        );
        assert!(c.reading("ls -l /srv").is_none());
    }
    for i in 0..MEMO_BYTES / 64 {
        let line = format!("echo {i:0>59}");
        assert!(c.reading(&line).is_none(), "{line}");
        assert!(c.memo.lock().unwrap().bytes <= MEMO_BYTES);
    }
    assert!(c.memo.lock().unwrap().lines.len() < MEMO_BYTES / 64);
    assert!(c.reading(secret).is_some());
}

#[test]
fn splitting_is_total_on_any_input() {
    for line in [
        "'unclosed",
        "\"a\\",
        "\\",
        "a|||b",
        "((((",
        "$(echo 'x|y' \"z;w\")",
    ] {
        let _ = simple_commands(line, 0);
        let _ = rules().reads_secret(line);
    }
    let deep = "sh -c '".repeat(50);
    let _ = simple_commands(&deep, 0);
}

/// A word's arguments read one pattern at a time are those the set of
/// all of them finds (`Commands::arguments` takes either way by how many
/// rules a line opens), for the words of every line these tests judge,
/// of the corpus's prompt lines, and of a line that names every program.
#[test]
fn arguments_one_by_one_are_those_of_the_set() {
    let c = rules();
    let all: Vec<usize> = (0..c.patterns.len()).collect();
    let mut words: Vec<String> = super::super::corpus::bulk(256 << 10)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    words.extend(
        [
            "--password",
            "-key",
            "/run/secrets/ca.crt",
            "help",
            "--help",
            "-p=x",
        ]
        .map(str::to_string),
    );
    let mut checked = 0;
    for w in &words {
        let one_by_one: Vec<usize> = all.chunks(4).flat_map(|few| c.arguments(w, few)).collect();
        assert_eq!(one_by_one, c.arguments(w, &all), "{w}");
        checked += usize::from(!one_by_one.is_empty());
    }
    assert!(checked > 100, "only {checked} words matched any argument");
}
