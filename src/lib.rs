//! walissh: an SSH bastion with an AI agent inside.
//!
//! This file is the command line: it parses arguments, loads the config,
//! and hands over to `daemon::serve` or to one of the small admin
//! commands. Exit codes: 0 success, 1 a user error (one line on stderr),
//! 2 bad usage. `main.rs` only calls [`main`]; being a library lets the
//! doctests (`text`) use the crate.
//!
//! The data path: client → `server` (russh handler, auth) → `session` (one
//! user's bridge) → `upstream` (russh client or local PTY), with `audit`
//! (SQLite, recordings) beside it.

mod agent;
mod audit;
mod auth;
mod bastion;
mod config;
mod context;
mod control;
mod daemon;
// The one reader of escape sequences for text bound for the model, shared
// with the redactor (its crate owns it).
use walissh_redact::escapes;
#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod logging;
mod manual;
mod password;
mod route;
mod sealed;
mod server;
mod session;
mod shutdown;
mod socket;
mod terminal;
pub mod text;
mod throttle;
mod upstream;
mod web;
mod workers;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;

#[derive(Parser)]
#[command(
    name = "walissh",
    version,
    about = "An SSH bastion with an AI agent inside"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
    /// What to log: error, warn, info, debug, trace, or a filter
    /// (`walissh=debug,russh=warn`) [default: RUST_LOG, else info for
    /// serve and warn for the rest]
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
}

/// `-c`/`--config`, the same on every subcommand that reads a config
/// (global, so `walissh audit verify -c FILE` takes it too).
#[derive(clap::Args)]
struct ConfigFile {
    /// The config file [default: /etc/walissh/walissh.toml if it exists, else
    /// the embedded default]
    #[arg(
        short = 'c',
        long = "config",
        global = true,
        env = "WALISSH_CONFIG",
        value_name = "FILE"
    )]
    path: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the bastion (the embedded default when there is no config).
    Serve {
        #[command(flatten)]
        config: ConfigFile,
    },
    /// Validate the config: exit 0, or 1 naming the file, line and key.
    CheckConfig {
        #[command(flatten)]
        config: ConfigFile,
    },
    /// Read a password from stdin and print its argon2id PHC string.
    HashPassword,
    /// Print the bastion's upstream public key (creating it if needed).
    Pubkey {
        #[command(flatten)]
        config: ConfigFile,
        /// Print the upstream CA's public key instead (`[upstream] ca_key`):
        /// the line for a target's TrustedUserCAKeys.
        #[arg(long)]
        ca: bool,
        /// Print the line users put in known_hosts to trust the targets'
        /// host certificates through the jump (`ssh -J bastion web1`):
        /// `@cert-authority NAMES KEY`, NAMES every target's name and
        /// aliases.
        #[arg(long, conflicts_with = "ca")]
        host_ca: bool,
    },
    /// Manage users' TOTP second factors.
    Totp {
        #[command(subcommand)]
        what: TotpCmd,
        #[command(flatten)]
        config: ConfigFile,
    },
    /// List sessions; or end one.
    Sessions {
        #[command(subcommand)]
        what: Option<SessionsCmd>,
        #[command(flatten)]
        config: ConfigFile,
        /// One JSON object per line.
        #[arg(long, global = true)]
        json: bool,
        /// Only the sessions open now (none ended in the audit), each with
        /// its node: the machine whose walissh carries it.
        #[arg(long)]
        active: bool,
        /// End in the audit the sessions NODE left open when it died
        /// (`session_end`, reason `node_reaped`), where several bastions
        /// share a PostgreSQL audit and NODE will not start again. A node
        /// that starts again ends its own.
        #[arg(long, value_name = "NODE", conflicts_with = "active")]
        reap: Option<String>,
    },
    /// Bring the audit database's schema to this version's (PostgreSQL's
    /// versioned migrations; SQLite's file is made or updated). walissh
    /// serve does this too at every start.
    Migrate {
        #[command(flatten)]
        config: ConfigFile,
    },
    /// List the agent's commands waiting for a second approval
    /// (four-eyes), oldest first.
    Approvals {
        #[command(flatten)]
        config: ConfigFile,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Give the second approval of a waiting command (`walissh
    /// approvals`), as `unix:ACCOUNT`; or, with `--deny`, refuse it.
    Approve {
        #[command(flatten)]
        config: ConfigFile,
        /// The request's id.
        id: String,
        /// Refuse it instead: the command does not run.
        #[arg(long)]
        deny: bool,
    },
    /// Print the man page (roff): `walissh man > walissh.1`; or, with
    /// `--dir`, write it and a page for each subcommand there.
    Man {
        /// Write every page (`walissh.1`, `walissh-serve.1` and the rest)
        /// into DIR.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print the completion script for a shell: `walissh completions bash`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Replay a session's recording in this terminal.
    Play {
        #[command(flatten)]
        config: ConfigFile,
        /// A session id (`walissh sessions`), or a recording's path.
        session: String,
        /// Play this many times faster.
        #[arg(long, default_value_t = 1.0)]
        speed: f64,
        /// Start at this marker: its number, or words of its label.
        #[arg(long)]
        from: Option<String>,
        /// List the markers instead of playing.
        #[arg(long)]
        markers: bool,
    },
    /// Print FILE (or stdin) as the agent sends it to the model, secrets
    /// redacted.
    ///
    /// The text goes through the agent's redactor, built from the same
    /// config (`[ai] redact`, `[context] redact_rules` and `redact_allow`),
    /// to stdout. Escape sequences and control characters are taken out, as
    /// for the model; bytes that are not UTF-8 are read as U+FFFD, as the
    /// agent reads a terminal's. At most 64 MiB (more: exit 2).
    Redact {
        #[command(flatten)]
        config: ConfigFile,
        /// Print, instead, one line per secret found:
        /// `LINE:COL-LINE:COL<TAB>KIND<TAB>RULE` (its first and last
        /// characters, 1-based, in the text without escape sequences), then
        /// how many; never the secret.
        #[arg(long)]
        explain: bool,
        /// The text to read; stdin when absent or `-`.
        file: Option<PathBuf>,
    },
    /// Copy the audit into DIR while the bastion runs: the database (by
    /// SQLite's online backup), its head file, the recordings and the
    /// audit key's public half, laid out as the state directory is.
    ///
    /// Restore by copying DIR's contents into an empty state directory
    /// (`cp -a DIR/. STATE_DIR/`) with the secrets kept offline;
    /// `walissh audit verify` then passes there. DIR must not exist.
    Backup {
        #[command(flatten)]
        config: ConfigFile,
        /// Where the copy goes: a new directory (made 0700; it must not
        /// exist).
        dir: PathBuf,
        /// Copy the secrets too (the audit, host, host CA and upstream
        /// keys, the TOTP store and its key, known_hosts): for a copy
        /// that is kept offline and encrypted.
        #[arg(long)]
        with_secrets: bool,
        /// Leave the recordings out.
        #[arg(long)]
        no_recordings: bool,
    },
    /// List audit events, oldest first; or check or show what secures them.
    Audit {
        #[command(subcommand)]
        what: Option<AuditCmd>,
        #[command(flatten)]
        config: ConfigFile,
        /// Only this session's events.
        #[arg(long)]
        session: Option<String>,
        /// Only this user's events.
        #[arg(long)]
        user: Option<String>,
        /// Only events on this target.
        #[arg(long)]
        target: Option<String>,
        /// Only events of this kind (repeat for several).
        #[arg(long)]
        kind: Vec<String>,
        /// Only events at or after this time: RFC 3339, or a duration ago (1h).
        #[arg(long)]
        since: Option<String>,
        /// Only events at or before this time: RFC 3339, or a duration ago.
        #[arg(long)]
        until: Option<String>,
        /// Keep printing new events as they are written.
        #[arg(long)]
        follow: bool,
        /// One JSON object per line.
        #[arg(long, global = true)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum SessionsCmd {
    /// End a live session on this bastion: its user sees the reason, and
    /// `session_killed` is audited (by `unix:ACCOUNT`).
    Kill {
        /// The session's id (`walissh sessions --active`).
        id: String,
        /// What the user is told.
        #[arg(long)]
        reason: String,
    },
}

#[derive(Subcommand)]
enum TotpCmd {
    /// Make a new TOTP secret for USER (replacing any) and print it as an
    /// otpauth:// URI and a QR code for an authenticator app.
    Enroll { user: String },
}

#[derive(Subcommand)]
enum AuditCmd {
    /// Check the hash chain, every checkpoint's signature and every
    /// finished recording; exit 0 only when all are intact.
    Verify {
        /// The audit key's public half to check against (an OpenSSH
        /// public key file), instead of the one in the state directory:
        /// pin the key you recorded elsewhere.
        #[arg(long)]
        key: Option<PathBuf>,
        /// Also check the database against the checkpoints `[audit]
        /// forward` sent: a file of the syslog lines or JSON lines a
        /// collector received. A database rolled back or cut before one
        /// of them fails.
        #[arg(long, value_name = "FILE")]
        against: Option<PathBuf>,
    },
    /// Print the audit key's public half and its fingerprint.
    Key,
    /// Find commands and questions that hold TEXT (whole words, any case).
    Search { text: String },
}

/// The program: parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The MCP SDK logs whole messages at info: a client or server could
    // flood the journal with them (and have walissh's own lines dropped).
    let default_level = if matches!(cli.command, Cmd::Serve { .. }) {
        "info,rmcp=warn"
    } else {
        "warn"
    };
    if let Err(msg) = logging::init(cli.log_level.as_deref(), default_level) {
        eprintln!("walissh: {msg}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Cmd::Redact {
            config,
            explain,
            file,
        } => redact(config.path, explain, file),
        cmd => run(cmd).map_err(|msg| (1, msg)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err((code, msg)) => {
            eprintln!("walissh: {msg}");
            ExitCode::from(code)
        }
    }
}

/// The most `walissh redact` reads.
const REDACT_MAX_BYTES: u64 = 64 << 20;

/// `walissh redact [--explain] [FILE]`: the text through the redactor the
/// agent builds from the same config (`context::redact::for_config`), with a
/// session's numbering of its own. Err: the exit code (2 for input over
/// `REDACT_MAX_BYTES`, else 1) and one line.
fn redact(
    given: Option<PathBuf>,
    explain: bool,
    file: Option<PathBuf>,
) -> Result<(), (u8, String)> {
    use std::io::Read;
    let config = load(given).map_err(|e| (1, e))?;
    let redactor = context::redact::for_config(&config).map_err(|e| (1, e.to_string()))?;
    let (name, input): (String, Box<dyn Read>) = match file {
        Some(f) if f.as_os_str() != "-" => {
            let opened = std::fs::File::open(&f)
                .map_err(|e| (1, format!("{}: cannot read: {e}", f.display())))?;
            (f.display().to_string(), Box::new(opened))
        }
        _ => ("stdin".to_string(), Box::new(std::io::stdin().lock())),
    };
    let mut bytes = Vec::new();
    input
        .take(REDACT_MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (1, format!("{name}: cannot read: {e}")))?;
    if bytes.len() as u64 > REDACT_MAX_BYTES {
        let why = format!("{name}: more than {} MiB: split it", REDACT_MAX_BYTES >> 20);
        return Err((2, why));
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut out = std::io::stdout().lock();
    let written = match explain {
        false => {
            let numbering = context::redact::Numbering::default();
            out.write_all(redactor.redact(&text, &numbering).0.as_bytes())
        }
        true => {
            let findings = redactor.explain(&text);
            let n = findings.len();
            findings
                .iter()
                .try_for_each(|f| {
                    let ((l1, c1), (l2, c2)) = (f.start, f.end);
                    writeln!(out, "{l1}:{c1}-{l2}:{c2}\t{}\t{}", f.kind, f.rule)
                })
                .and_then(|()| match n {
                    1 => writeln!(out, "1 finding"),
                    n => writeln!(out, "{n} findings"),
                })
        }
    };
    unless_reader_left(written.and_then(|()| out.flush()))
        .map_err(|e| (1, format!("cannot write output: {e}")))
}

fn load(given: Option<PathBuf>) -> Result<Config, String> {
    Config::load(Config::resolve(given).as_deref()).map_err(|e| e.to_string())
}

/// The config the audit's readers (`audit`, `sessions`, `play`) use: as
/// `load`; but with no config given and no audit database where the
/// system config points, the embedded default's (`./walissh-state`) when
/// `serve` left one here, with a line saying so.
fn load_reader(given: Option<PathBuf>) -> Result<Config, String> {
    let named = given.is_some();
    let config = load(given)?;
    if named
        || config.embedded
        || config.audit_postgres().is_some()
        || config.audit_db_path().exists()
    {
        return Ok(config);
    }
    let embedded = Config::load(None).map_err(|e| e.to_string())?;
    if !embedded.audit_db_path().exists() {
        return Ok(config);
    }
    eprintln!(
        "walissh: {} has no audit database; reading {} (the embedded default's)",
        config.state_dir().display(),
        embedded.state_dir().display()
    );
    Ok(embedded)
}

/// What `serve` runs on, as `check-config` checks it, so the two cannot
/// disagree.
struct Checked {
    config: Config,
    skills: agent::skills::Skills,
    redactor: context::redact::Redactor,
    trust: auth::Trust,
}

/// The config, checked against the files it names, its skills and its
/// redactor.
fn checked(given: Option<PathBuf>) -> Result<Checked, String> {
    let config = load(given)?;
    config.check_files().map_err(|e| e.to_string())?;
    let skills = agent::skills::Skills::configured(&config).map_err(|e| e.to_string())?;
    // The rules of `[context] redact_rules` compile where the redactor is
    // built: the same refusal here as at a reload.
    let redactor = context::redact::for_config(&config).map_err(|e| e.to_string())?;
    let trust = auth::Trust::load(&config).map_err(|e| e.to_string())?;
    // Last, so that a config with other faults is told about those first.
    config.check_has_users().map_err(|e| e.to_string())?;
    Ok(Checked {
        config,
        skills,
        redactor,
        trust,
    })
}

/// `walissh totp enroll USER`: the secret is stored sealed, and shown
/// once, as a URI and a QR code.
fn totp_enroll(config: &Config, user: &str) -> Result<(), String> {
    let Some(u) = config.user(user) else {
        return Err(format!("no user `{user}` in {}", config.source));
    };
    keys::create_private_dir(config.state_dir())?;
    let store = auth::totp::SecretStore::new(
        config.state_dir(),
        *config.server.auth_max_failures.get_ref(),
        std::time::Duration::from_secs(*config.server.auth_lockout_s.get_ref()),
    );
    let enrolled = store.enroll(user)?;
    if enrolled.replaced {
        eprintln!("walissh: {user}'s previous TOTP secret is replaced");
    }
    let uri = &enrolled.uri;
    let qr = qrcode::QrCode::new(uri.as_bytes())
        .map_err(|e| format!("cannot draw the QR code: {e}"))?
        .render::<qrcode::render::unicode::Dense1x2>()
        .quiet_zone(true)
        .build();
    println!("{uri}\n\n{qr}\n");
    println!("Scan the code, or enter the URI, in an authenticator app.");
    if u.mfa != config::Mfa::Totp {
        println!(
            "{user} has no mfa = \"totp\" in the config yet: codes are not asked until it does."
        );
    }
    // Shown: another enrolment of the user may replace it from now on.
    std::io::Write::flush(&mut std::io::stdout())
        .map_err(|e| format!("cannot print the URI: {e}"))?;
    drop(enrolled);
    Ok(())
}

fn run(cmd: Cmd) -> Result<(), String> {
    match cmd {
        Cmd::Redact { .. } => unreachable!("`main` runs it"),
        Cmd::Serve { config } => {
            let checked = checked(config.path)?;
            // The main runtime listens, catches signals and reloads; the
            // connections run on the workers (see `workers`).
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the runtime: {e}"))?;
            let workers = workers::Workers::start()?;
            let Checked {
                config,
                skills,
                redactor,
                trust,
            } = checked;
            let result =
                runtime.block_on(daemon::serve(config, (skills, redactor), trust, &workers));
            workers.stop();
            // Do not wait on blocking tasks stuck on a dead peer or disk.
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            result
        }
        Cmd::CheckConfig { config } => {
            let checked = checked(config.path)?;
            println!("{}: ok", checked.config.source);
            Ok(())
        }
        Cmd::Man { dir } => {
            use clap::CommandFactory;
            let pages = manual::pages(Cli::command());
            let Some(dir) = dir else {
                let written = std::io::stdout().write_all(pages[0].1.as_bytes());
                return unless_reader_left(written)
                    .map_err(|e| format!("cannot write the man page: {e}"));
            };
            for (name, roff) in pages {
                let path = dir.join(name);
                std::fs::write(&path, roff)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            Ok(())
        }
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "walissh",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Cmd::HashPassword => {
            let password = read_password()?;
            println!("{}", password::hash(&password)?);
            Ok(())
        }
        Cmd::Backup {
            config,
            dir,
            with_secrets,
            no_recordings,
        } => {
            let config = load(config.path)?;
            if config.audit_postgres().is_some() {
                return Err("the audit is in PostgreSQL: back it up with pg_dump (docs/operations.md); walissh backup copies a SQLite audit".into());
            }
            let from = audit::backup::Sources {
                db: config.audit_db_path(),
                recordings: (!no_recordings).then(|| config.recordings_dir()),
                public_key: audit_key(&config, None)?
                    .to_openssh()
                    .map_err(|e| format!("the audit key: {e}"))?,
                secrets: Vec::new(),
                elsewhere: Vec::new(),
            };
            let from = match with_secrets {
                true => {
                    let (secrets, elsewhere) = secrets(&config);
                    audit::backup::Sources {
                        secrets,
                        elsewhere,
                        ..from
                    }
                }
                false => from,
            };
            if !from.db.exists() {
                return Err(format!("{}: no audit database", from.db.display()));
            }
            let copied = audit::backup::backup(&from, &dir)?;
            println!("{}", copied.line(&dir));
            Ok(())
        }
        Cmd::Pubkey {
            config,
            host_ca: true,
            ..
        } => {
            let config = load(config.path)?;
            keys::create_private_dir(config.state_dir())?;
            let ca = keys::load_or_generate(&config.host_ca_path())?;
            println!("{}", server::jump::known_hosts_line(&config, &ca));
            Ok(())
        }
        Cmd::Pubkey { config, ca, .. } => {
            let config = load(config.path)?;
            keys::create_private_dir(config.state_dir())?;
            let path = match ca {
                false => config.identity_path(),
                true => config
                    .upstream
                    .ca_key
                    .as_ref()
                    .map(|k| k.get_ref().clone())
                    .ok_or("the config has no [upstream] ca_key")?,
            };
            let key = keys::load_or_generate(&path)?;
            let comment = if ca { "walissh-ca" } else { "walissh-bastion" };
            println!("{}", keys::public_line(&key, comment));
            Ok(())
        }
        Cmd::Totp {
            what: TotpCmd::Enroll { user },
            config,
        } => totp_enroll(&load(config.path)?, &user),
        Cmd::Sessions {
            what: Some(SessionsCmd::Kill { id, reason }),
            config,
            ..
        } => {
            let config = load(config.path)?;
            let request = serde_json::json!({"op": "kill", "session": id, "reason": reason});
            let done = control::ask(config.state_dir(), request)?;
            let text = |k: &str| {
                done.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            println!("ended session {id} ({}@{})", text("user"), text("target"));
            Ok(())
        }
        Cmd::Approvals { config, json } => {
            let config = load(config.path)?;
            let listed = control::ask(config.state_dir(), serde_json::json!({"op": "approvals"}))?;
            let empty = Vec::new();
            let all = listed
                .get("approvals")
                .and_then(|v| v.as_array())
                .unwrap_or(&empty);
            for a in all {
                match json {
                    true => println!("{a}"),
                    false => println!("{}", approval_line(a)),
                }
            }
            if all.is_empty() && !json {
                eprintln!("no command waits for a second approval");
            }
            Ok(())
        }
        Cmd::Approve { config, id, deny } => {
            let config = load(config.path)?;
            let request = serde_json::json!({"op": "answer", "id": id, "approve": !deny});
            let done = control::ask(config.state_dir(), request)?;
            let a = done.get("approval").cloned().unwrap_or_default();
            let verb = if deny { "denied" } else { "approved" };
            println!("{verb}: {}", approval_line(&a));
            Ok(())
        }
        Cmd::Sessions {
            what: None,
            config,
            json,
            active,
            reap: None,
        } => {
            let config = load_reader(config.path)?;
            let audit = audit::readable::Readable::open(&config)?;
            let mut out = Lines::new(json);
            audit::db::sessions_json(audit.path(), (active, &config.node_name()), &mut out)?;
            out.finish()
        }
        Cmd::Sessions {
            config,
            reap: Some(node),
            ..
        } => {
            let config = load(config.path)?;
            let by = format!("unix:{}", crate::config::current_account()?.name);
            let ended = audit::nodes::reap(&config, &node, &by)?;
            println!("{ended} session(s) of node {node} ended (reason node_reaped)");
            Ok(())
        }
        Cmd::Migrate { config } => {
            let config = load(config.path)?;
            for line in audit::nodes::migrate(&config)? {
                println!("{line}");
            }
            Ok(())
        }
        Cmd::Play {
            config,
            session,
            speed,
            from,
            markers,
        } => {
            // A path says so (a slash, or .cast): a file named like a
            // session id in this directory is not taken for the session.
            let is_path = session.contains('/') || session.ends_with(".cast");
            let scratch = audit::readable::Scratch::new()?;
            let path = match is_path {
                true => PathBuf::from(&session),
                false => {
                    let config = load_reader(config.path)?;
                    let audit = audit::readable::Readable::open(&config)?;
                    let named = audit::query::recording(audit.path(), &session)?
                        .map(PathBuf::from)
                        .ok_or_else(|| format!("session {session} has no recording"))?;
                    let said = audit::query::recording_digest(audit.path(), &session)?;
                    let sealed = said.as_ref().map(|(_, len)| *len);
                    let file = audit::readable::recording_file(&config, (named, sealed), &scratch)?;
                    // A copy from the bucket is played only if it is the
                    // recording the chain holds; one the chain has no
                    // digest for (its session did not end on its node) is
                    // played as unsealed, and said so.
                    if file.starts_with(scratch.path()) {
                        let got = audit::chain::file_digest(&file).map_err(|e| e.to_string())?;
                        if said.is_none() {
                            eprintln!(
                                "walissh: session {session}: its end holds no digest (it did not end on its node): the bucket's copy is played unverified"
                            );
                        } else if said.as_ref() != Some(&got) {
                            return Err(format!(
                                "session {session}: the bucket's copy is not the recording the audit holds (its digest differs)"
                            ));
                        }
                    }
                    file
                }
            };
            let cast = audit::play::load(&path)?;
            let mut out = std::io::stdout().lock();
            let written = if markers {
                cast.markers().iter().try_for_each(|m| {
                    let label = agent::render::printable(&m.label);
                    writeln!(out, "{:>3}  {:>9.2}s  {label}", m.number, m.at)
                })
            } else {
                let from = from.as_deref().map(|f| cast.marker(f)).transpose()?;
                cast.play(speed, from.as_ref(), &mut out)
            };
            let written = unless_reader_left(written);
            written.map_err(|e| format!("cannot write output: {e}"))
        }
        Cmd::Audit {
            what,
            config,
            session,
            user,
            target,
            kind,
            since,
            until,
            follow,
            json,
        } => {
            let config = load_reader(config.path)?;
            let mut audit = audit::readable::Readable::open(&config)?;
            let db = audit.path().to_path_buf();
            let mut emit = |v: serde_json::Value| {
                let mut out = std::io::stdout().lock();
                unless_reader_left(
                    match json {
                        true => writeln!(out, "{v}"),
                        false => writeln!(out, "{}", human(v.to_string().as_bytes())),
                    }
                    .and_then(|()| out.flush()),
                )
            };
            match what {
                None => {
                    let filter = audit::query::Filter {
                        user,
                        target,
                        kinds: known_kinds(kind)?,
                        session,
                        since: since.as_deref().map(audit::query::time_bound).transpose()?,
                        until: until.as_deref().map(audit::query::time_bound).transpose()?,
                    };
                    match follow {
                        true => {
                            audit::query::follow(&db, &filter, &mut emit, &mut || audit.refresh())
                        }
                        false => audit::query::events(&db, &filter, 0, &mut emit).map(|_| ()),
                    }
                }
                Some(AuditCmd::Search { text }) => audit::query::search(&db, &text, &mut emit),
                Some(AuditCmd::Key) => {
                    let key = audit_key(&config, None)?;
                    println!("{}", key.to_openssh().map_err(|e| e.to_string())?);
                    println!("{}", key.fingerprint(Default::default()));
                    Ok(())
                }
                Some(AuditCmd::Verify { key, against }) => {
                    let scratch = audit::readable::Scratch::new()?;
                    let a = &config.audit;
                    let options = audit::verify::Options {
                        key: audit_key(&config, key.as_deref())?,
                        freshness: audit::verify::Freshness::of(
                            a.checkpoint_events,
                            std::time::Duration::from_secs(a.checkpoint_s),
                        ),
                        against,
                        recordings: Some(config.recordings_dir()),
                        bucket: config
                            .recordings_bucket()
                            .map(|url| {
                                let into = scratch.path().to_path_buf();
                                audit::upload::Bucket::new(url).map(|b| (b, into))
                            })
                            .transpose()?,
                    };
                    let report = audit::verify::verify(&db, &options)?;
                    match json {
                        true => println!("{}", report.to_json()),
                        false => println!("{}", report.line()),
                    }
                    match report.broken {
                        None => Ok(()),
                        Some(_) => Err("the audit does not verify".into()),
                    }
                }
            }
        }
    }
}

/// Output written, or its reader gone: a reader that closes the pipe
/// early (`walissh audit | head -1`) ends the command quietly and with
/// status 0, as `head` meant.
fn unless_reader_left(written: std::io::Result<()>) -> std::io::Result<()> {
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => other,
    }
}

/// `--kind` values, each one of the audit's kinds: a misspelt kind would
/// show nothing, which reads as "nothing happened".
fn known_kinds(given: Vec<String>) -> Result<Vec<String>, String> {
    for k in &given {
        if audit::Kind::parse(k).is_none() {
            let all: Vec<&str> = audit::Kind::ALL.iter().map(|k| k.as_str()).collect();
            return Err(format!(
                "--kind {k}: no such kind; the kinds: {}",
                all.join(", ")
            ));
        }
    }
    Ok(given)
}

/// The audit key's public half: from `file` (an OpenSSH public key), or
/// the one in the state directory. Never made here: the bastion makes it
/// at its first start, as its own account.
fn audit_key(config: &Config, file: Option<&Path>) -> Result<russh::keys::PublicKey, String> {
    match file {
        Some(f) => russh::keys::load_public_key(f).map_err(|e| format!("{}: {e}", f.display())),
        None => {
            let path = config.state_dir().join(audit::chain::KEY_FILE);
            if !path.exists() {
                return Err(format!(
                    "{}: no audit key yet (walissh makes it at its first start)",
                    path.display()
                ));
            }
            Ok(keys::load_private(&path)?.public_key().clone())
        }
    }
}

/// The secret files a backup `--with-secrets` copies, by their names in
/// the state directory (those the config keeps there), and the ones it
/// keeps elsewhere.
fn secrets(config: &Config) -> (Vec<(String, PathBuf)>, Vec<PathBuf>) {
    let state = config.state_dir();
    let named = [
        config.host_key_path(),
        config.host_ca_path(),
        config.identity_path(),
        config.known_hosts_path(),
        state.join(audit::chain::KEY_FILE),
        state.join("totp.json"),
        state.join("totp.key"),
    ];
    let (here, elsewhere): (Vec<PathBuf>, Vec<PathBuf>) =
        named.into_iter().partition(|p| p.parent() == Some(state));
    let here = here
        .into_iter()
        .filter_map(|p| Some((p.file_name()?.to_string_lossy().into_owned(), p)))
        .collect();
    (here, elsewhere)
}

/// One password from stdin: without echo on a terminal, else its first line.
fn read_password() -> Result<String, String> {
    let password = if std::io::stdin().is_terminal() {
        rpassword::prompt_password("Password: ")
            .map_err(|e| format!("cannot read password: {e}"))?
    } else {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("cannot read password: {e}"))?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    if password.is_empty() {
        return Err("empty password".into());
    }
    Ok(password)
}

/// Prints JSON lines as they are, or as `key=value` text for people.
/// One waiting approval, for a person: its id, who asks on which target,
/// and the command exactly (control characters spelled out).
fn approval_line(a: &serde_json::Value) -> String {
    let text = |k: &str| a.get(k).and_then(|v| v.as_str()).unwrap_or("");
    format!(
        "{}  {}@{}  session {}  $ {}",
        text("id"),
        text("user"),
        text("target"),
        text("session"),
        text("command").escape_debug()
    )
}

struct Lines {
    json: bool,
    buf: Vec<u8>,
}

impl Lines {
    fn new(json: bool) -> Lines {
        Lines {
            json,
            buf: Vec::new(),
        }
    }

    fn finish(self) -> Result<(), String> {
        let mut stdout = std::io::stdout().lock();
        let result = if self.json {
            stdout.write_all(&self.buf)
        } else {
            self.buf
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .try_for_each(|line| writeln!(stdout, "{}", human(line)))
        };
        unless_reader_left(result).map_err(|e| format!("cannot write output: {e}"))
    }
}

impl Write for Lines {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.write(data)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn human(line: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(o)) => o
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                // Login names and commands come from clients: never let
                // them put control characters on an administrator's terminal.
                serde_json::Value::String(s)
                    if s.chars()
                        .any(|c| c.is_control() || c == ' ' || agent::policy::invisible(c)) =>
                {
                    format!(
                        "{k}=\"{}\"",
                        agent::render::exact(&s.replace('\\', "\\\\").replace('"', "\\\""))
                    )
                }
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::from_utf8_lossy(line).into_owned(),
    }
}
