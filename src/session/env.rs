//! What a client may set in the target's environment (`env` requests).
//!
//! Like OpenSSH's default `AcceptEnv LANG LC_*`, only the locale travels,
//! but by an allow-list of exact names and with a short value of the
//! characters locale names use: other variables change how the target's
//! shell behaves, and an unbounded value or count would let one client
//! fill the bastion's memory (120,000 requests of 30 KB did). Refusals are
//! counted, not kept, and reported once per channel.

/// The locale variables glibc reads: the only names accepted.
const NAMES: &[&str] = &[
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_ADDRESS",
    "LC_COLLATE",
    "LC_CTYPE",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NAME",
    "LC_NUMERIC",
    "LC_PAPER",
    "LC_TELEPHONE",
    "LC_TIME",
];

/// A locale value is at most this long (`en_US.UTF-8@euro`; `LANGUAGE`
/// lists a few separated by `:`).
pub(crate) const VALUE_MAX: usize = 64;

/// Refused names kept for the audit row, each cut to a few bytes.
const NAMES_REPORTED: usize = 8;
const NAME_REPORTED_MAX: usize = 32;

/// Whether `name=value` may be set on the target.
pub(crate) fn acceptable(name: &str, value: &str) -> bool {
    NAMES.contains(&name)
        && value.len() <= VALUE_MAX
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.@:-".contains(&b))
}

/// One channel's environment requests: what is accepted (one value per
/// name, the last one sent), and a count of what is refused.
#[derive(Default)]
pub(crate) struct Env {
    accepted: Vec<(String, String)>,
    refused: u64,
    refused_names: Vec<String>,
}

impl Env {
    /// Takes one request. What is kept is bounded by the allow-list
    /// whatever the client sends.
    pub(crate) fn request(&mut self, name: String, value: String) {
        if !acceptable(&name, &value) {
            self.refused += 1;
            let name = crate::text::prefix(&name, NAME_REPORTED_MAX).to_string();
            if self.refused_names.len() < NAMES_REPORTED && !self.refused_names.contains(&name) {
                self.refused_names.push(name);
            }
            return;
        }
        match self.accepted.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.accepted.push((name, value)),
        }
    }

    /// The accepted variables, for the target; the count of refusals
    /// stays for [`Env::refusals`].
    pub(crate) fn take_accepted(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.accepted)
    }

    /// This channel's refusals, if any: how many, and an `env_refused`
    /// row with the first few names (the connection's tally adds the
    /// count).
    pub(crate) fn refusals(&self, user: &str) -> Option<(crate::audit::Event, u64)> {
        (self.refused > 0).then(|| {
            let row = crate::audit::Event::new(crate::audit::Kind::EnvRefused)
                .user(user.to_string())
                .field("names", self.refused_names.clone());
            (row, self.refused)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_locale_values_of_listed_names_pass() {
        assert!(acceptable("LANG", "en_US.UTF-8"));
        assert!(acceptable("LANGUAGE", "de_DE:en"));
        assert!(acceptable("LC_ALL", "C"));
        for (name, value) in [
            ("LC_EVIL", "C"),
            ("LD_PRELOAD", "/tmp/x.so"),
            ("BASH_ENV", "/tmp/x"),
            ("LANG", "C; rm -rf /"),
            ("LANG", "$(id)"),
            ("LC_ALL", "en\nUS"),
        ] {
            assert!(!acceptable(name, value), "{name}={value}");
        }
        assert!(!acceptable("LANG", &"a".repeat(VALUE_MAX + 1)));
    }

    /// A flood keeps at most one value per listed name, and a count.
    #[test]
    fn a_flood_keeps_a_bounded_environment_and_counts_the_rest() {
        let mut env = Env::default();
        for i in 0..100_000u32 {
            env.request(format!("LC_X{i}"), "x".repeat(30_000));
            env.request("LC_ALL".into(), format!("C{}", i % 10));
            env.request("LANG".into(), "x".repeat(30_000));
        }
        let (ev, n) = env.refusals("alice").unwrap();
        assert_eq!(n, 200_000);
        assert_eq!(ev.fields["names"].as_array().unwrap().len(), NAMES_REPORTED);
        assert_eq!(
            env.take_accepted(),
            [("LC_ALL".to_string(), "C9".to_string())]
        );
    }
}
