//! Which target a session goes to: the login name's `user:target` (or
//! `user#target`), the user's only target, or a menu in the terminal.
//!
//! Deny by default: a target is reachable only when one of the user's
//! `targets` globs matches it, and a forbidden target gets exactly the
//! same answer as one that does not exist.

use russh::server::Msg;
use russh::{Channel, ChannelMsg};

use crate::config::{Config, TargetConfig, UserConfig};

/// A login name split into the bastion user and the requested target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Login {
    pub(crate) user: String,
    pub(crate) target: Option<String>,
}

impl Login {
    /// `alice:web1` and `alice#web1` both name target web1; `alice` names none.
    pub(crate) fn parse(name: &str) -> Login {
        match name.split_once([':', '#']) {
            Some((user, target)) if !target.is_empty() => Login {
                user: user.to_string(),
                target: Some(target.to_string()),
            },
            Some((user, _)) => Login {
                user: user.to_string(),
                target: None,
            },
            None => Login {
                user: name.to_string(),
                target: None,
            },
        }
    }
}

/// Why no target was chosen: a message for the user, and, for a denied
/// request, the name to audit as `target_denied`.
#[derive(Debug)]
pub(crate) struct NoTarget {
    pub(crate) message: String,
    pub(crate) denied: Option<String>,
}

/// The target named in the login, if the user may reach it.
pub(crate) fn requested<'a>(
    config: &'a Config,
    user: &UserConfig,
    name: &str,
) -> Result<&'a TargetConfig, NoTarget> {
    match config.target(name) {
        Some(t) if user.may_reach(name) => Ok(t),
        // The same words whether it is missing or forbidden: the answer
        // must not reveal which targets exist.
        _ => Err(NoTarget {
            message: format!("target {name} does not exist or you may not reach it"),
            denied: Some(name.to_string()),
        }),
    }
}

/// The message for a session that named no target and cannot show a menu.
pub(crate) fn must_name(allowed: &[&TargetConfig], user: &str) -> NoTarget {
    let message = if allowed.is_empty() {
        "you may not reach any target; ask an administrator".to_string()
    } else {
        let names: Vec<&str> = allowed.iter().map(|t| t.name()).collect();
        format!(
            "name a target, as in ssh {user}:{}@bastion; you may reach: {}",
            names[0],
            names.join(", ")
        )
    };
    NoTarget {
        message,
        denied: None,
    }
}

/// Shows a menu of `names` on the client's terminal and waits for a choice
/// (arrows or digits, then Enter; q, Ctrl-C or Ctrl-D to leave). Window
/// changes meanwhile are passed to `on_resize`.
pub(crate) async fn menu(
    channel: &mut Channel<Msg>,
    names: &[&str],
    mut on_resize: impl FnMut(u32, u32),
) -> Option<usize> {
    let mut selected = 0usize;
    let mut keys = Keys::default();
    let intro = "\r\nwalissh: choose a target (arrows or digits, Enter; q to leave)\r\n";
    channel.data_bytes(intro.as_bytes().to_vec()).await.ok()?;
    channel
        .data_bytes(render(names, selected, false))
        .await
        .ok()?;
    loop {
        let data = match channel.wait().await? {
            ChannelMsg::Data { data } => data,
            ChannelMsg::WindowChange {
                col_width,
                row_height,
                ..
            } => {
                on_resize(col_width, row_height);
                continue;
            }
            ChannelMsg::Eof | ChannelMsg::Close => return None,
            _ => continue,
        };
        for key in keys.feed(&data) {
            match key {
                Key::Up => selected = selected.saturating_sub(1),
                Key::Down => selected = (selected + 1).min(names.len() - 1),
                Key::Digit(d) if (1..=names.len()).contains(&d) => selected = d - 1,
                Key::Digit(_) => {}
                Key::Enter => {
                    let done = format!("walissh: connecting to {}\r\n", names[selected]);
                    channel.data_bytes(done.into_bytes()).await.ok()?;
                    return Some(selected);
                }
                Key::Quit => return None,
            }
            channel
                .data_bytes(render(names, selected, true))
                .await
                .ok()?;
        }
    }
}

/// The menu's lines; when `redraw`, first moves back over the old ones.
fn render(names: &[&str], selected: usize, redraw: bool) -> Vec<u8> {
    let mut out = String::new();
    if redraw {
        out.push_str(&format!("\x1b[{}A", names.len()));
    }
    for (i, name) in names.iter().enumerate() {
        let (mark, on, off) = if i == selected {
            (">", "\x1b[7m", "\x1b[0m")
        } else {
            (" ", "", "")
        };
        out.push_str(&format!("\r\x1b[K {mark} {on}{}) {name}{off}\r\n", i + 1));
    }
    out.into_bytes()
}

#[derive(Debug, PartialEq, Eq)]
enum Key {
    Up,
    Down,
    Digit(usize),
    Enter,
    Quit,
}

/// Turns keystrokes into menu keys; an escape sequence may be split
/// across reads.
#[derive(Default)]
struct Keys {
    pending: Vec<u8>,
}

impl Keys {
    fn feed(&mut self, data: &[u8]) -> Vec<Key> {
        let mut keys = Vec::new();
        for &b in data {
            if !self.pending.is_empty() {
                self.pending.push(b);
                match self.pending.as_slice() {
                    [0x1b] | [0x1b, b'[' | b'O'] => continue,
                    [0x1b, b'[' | b'O', b'A'] => keys.push(Key::Up),
                    [0x1b, b'[' | b'O', b'B'] => keys.push(Key::Down),
                    _ => {}
                }
                self.pending.clear();
                continue;
            }
            match b {
                0x1b => self.pending.push(b),
                b'\r' | b'\n' => keys.push(Key::Enter),
                b'1'..=b'9' => keys.push(Key::Digit((b - b'0') as usize)),
                b'k' => keys.push(Key::Up),
                b'j' => keys.push(Key::Down),
                b'q' | 0x03 | 0x04 => keys.push(Key::Quit),
                _ => {}
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_names() {
        assert_eq!(
            Login::parse("alice:web1"),
            Login {
                user: "alice".into(),
                target: Some("web1".into())
            }
        );
        assert_eq!(Login::parse("alice#web1").target.as_deref(), Some("web1"));
        assert_eq!(Login::parse("alice").target, None);
        assert_eq!(Login::parse("alice:").target, None);
    }

    #[test]
    fn keys_split_escape_sequences() {
        let mut k = Keys::default();
        assert_eq!(k.feed(b"\x1b["), vec![]);
        assert_eq!(k.feed(b"B2\r"), vec![Key::Down, Key::Digit(2), Key::Enter]);
        assert_eq!(k.feed(b"\x1bOAq"), vec![Key::Up, Key::Quit]);
    }
}
