//! Command-line options read the way getopt reads them: short options in
//! clusters (`-tlnp`), values attached or in the next word (`-n50`, `-n
//! 50`), `--long=value` and `--long value`, `--` ending the options, and
//! (GNU) options after operands. A [`Spec`] lists what a program *allows*;
//! any other option, and any abbreviation of a long one, is an error, so
//! the caller asks rather than guesses. What it leaves to others: what
//! the options and operands mean (`auto`, `unwrap`).

/// The options a program is allowed, for one use of it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Spec {
    /// Short options without a value.
    pub(crate) flags: &'static str,
    /// Short options that take a value.
    pub(crate) values: &'static str,
    /// Long options without a value (no leading `--`).
    pub(crate) long_flags: &'static [&'static str],
    /// Long options that take a value.
    pub(crate) long_values: &'static [&'static str],
    /// Short options whose value is optional: only an attached one counts
    /// (`-i{}`); long options whose value is optional (`--color[=when]`).
    pub(crate) optional: &'static str,
    pub(crate) long_optional: &'static [&'static str],
    /// Options stop at the first operand (POSIX, and every wrapper):
    /// what follows belongs to the command it runs.
    pub(crate) stop_at_operand: bool,
    /// A long option's value counts only when attached (`--color=never`):
    /// GNU tools make some values optional (`grep --color`, `diff
    /// --unified`, `date --iso-8601`), and then the next word is an
    /// operand. Reading every one as attached-only never lets an operand
    /// pass as a value.
    pub(crate) long_attached: bool,
    /// With `long_attached`: long options whose value the program always
    /// requires, so the next word is theirs (`--since '1 hour ago'`).
    pub(crate) long_required: &'static [&'static str],
}

/// One option as given: its name (`-n`, `--lines`) and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Opt {
    pub(crate) name: String,
    pub(crate) value: Option<String>,
}

/// The options and operands of one command line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Parsed {
    pub(crate) opts: Vec<Opt>,
    pub(crate) operands: Vec<String>,
    /// Index in the arguments where the operands started, when options
    /// stop at the first operand.
    pub(crate) rest: usize,
}

impl Parsed {
    pub(crate) fn has(&self, name: &str) -> bool {
        self.opts.iter().any(|o| o.name == name)
    }

    pub(crate) fn value(&self, name: &str) -> Option<&str> {
        self.opts
            .iter()
            .find(|o| o.name == name)
            .and_then(|o| o.value.as_deref())
    }
}

impl Spec {
    /// Short options only; options may follow operands (GNU).
    pub(crate) const fn short(flags: &'static str, values: &'static str) -> Spec {
        Spec {
            flags,
            values,
            long_flags: &[],
            long_values: &[],
            optional: "",
            long_optional: &[],
            stop_at_operand: false,
            long_attached: false,
            long_required: &[],
        }
    }

    /// Short and long options; options may follow operands (GNU).
    pub(crate) const fn long(
        flags: &'static str,
        values: &'static str,
        long_flags: &'static [&'static str],
        long_values: &'static [&'static str],
    ) -> Spec {
        Spec {
            long_flags,
            long_values,
            ..Spec::short(flags, values)
        }
    }

    /// A wrapper's options: they stop at the command it runs.
    pub(crate) const fn wrapper(flags: &'static str, values: &'static str) -> Spec {
        Spec {
            stop_at_operand: true,
            ..Spec::short(flags, values)
        }
    }

    /// Reads `args` (the words after the program). The error names the
    /// first option the spec does not allow, or one missing its value.
    pub(crate) fn parse(&self, args: &[&str]) -> Result<Parsed, String> {
        let mut out = Parsed::default();
        let mut i = 0;
        while i < args.len() {
            let a = args[i];
            i += 1;
            if a == "--" {
                out.rest = i;
                out.operands.extend(args[i..].iter().map(|s| s.to_string()));
                return Ok(out);
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, attached) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let value = if self.long_values.contains(&name) {
                    match attached {
                        Some(v) => Some(v),
                        None if self.long_attached && !self.long_required.contains(&name) => {
                            return Err(format!("--{name} without =VALUE"));
                        }
                        None if i < args.len() => {
                            i += 1;
                            Some(args[i - 1].to_string())
                        }
                        None => return Err(format!("--{name} needs a value")),
                    }
                } else if self.long_optional.contains(&name)
                    || self.long_flags.contains(&name) && attached.is_none()
                {
                    attached
                } else {
                    return Err(format!("option --{name}"));
                };
                out.opts.push(Opt {
                    name: format!("--{name}"),
                    value,
                });
                continue;
            }
            if a.len() > 1 && a.starts_with('-') {
                let cluster: Vec<char> = a[1..].chars().collect();
                let mut j = 0;
                while j < cluster.len() {
                    let c = cluster[j];
                    j += 1;
                    if self.flags.contains(c) {
                        out.opts.push(Opt {
                            name: format!("-{c}"),
                            value: None,
                        });
                    } else if self.optional.contains(c) {
                        let rest: String = cluster[j..].iter().collect();
                        out.opts.push(Opt {
                            name: format!("-{c}"),
                            value: (!rest.is_empty()).then_some(rest),
                        });
                        break;
                    } else if self.values.contains(c) {
                        let value = if j < cluster.len() {
                            cluster[j..].iter().collect()
                        } else if i < args.len() {
                            i += 1;
                            args[i - 1].to_string()
                        } else {
                            return Err(format!("-{c} needs a value"));
                        };
                        out.opts.push(Opt {
                            name: format!("-{c}"),
                            value: Some(value),
                        });
                        break;
                    } else {
                        return Err(format!("option -{c}"));
                    }
                }
                continue;
            }
            if self.stop_at_operand {
                out.rest = i - 1;
                out.operands
                    .extend(args[i - 1..].iter().map(|s| s.to_string()));
                return Ok(out);
            }
            out.operands.push(a.to_string());
        }
        out.rest = args.len();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SORT: Spec = Spec {
        flags: "nru",
        values: "kt",
        long_flags: &["reverse"],
        long_values: &["key"],
        optional: "",
        long_optional: &[],
        stop_at_operand: false,
        long_attached: false,
        long_required: &[],
    };

    fn names(p: &Parsed) -> Vec<(&str, Option<&str>)> {
        p.opts
            .iter()
            .map(|o| (o.name.as_str(), o.value.as_deref()))
            .collect()
    }

    #[test]
    fn clusters_and_attached_values() {
        let p = SORT
            .parse(&["-nrk2", "f", "-t", ":", "--key=3", "--key", "4"])
            .unwrap();
        assert_eq!(
            names(&p),
            [
                ("-n", None),
                ("-r", None),
                ("-k", Some("2")),
                ("-t", Some(":")),
                ("--key", Some("3")),
                ("--key", Some("4"))
            ]
        );
        assert_eq!(p.operands, ["f"]);
    }

    #[test]
    fn what_is_not_listed_is_refused() {
        for args in [
            &["-o/etc/passwd"][..],
            &["-uo", "x"],
            &["--out=x"],
            &["--rev"],
            &["--compress-program=sh"],
            &["--reverse=1"],
            &["-k"],
        ] {
            assert!(SORT.parse(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn double_dash_and_operands() {
        let p = SORT.parse(&["a", "-n", "--", "-r"]).unwrap();
        assert_eq!(p.operands, ["a", "-r"]);
        let stop = Spec {
            stop_at_operand: true,
            ..SORT
        };
        let p = stop.parse(&["-n", "rm", "-rf", "/"]).unwrap();
        assert_eq!(p.operands, ["rm", "-rf", "/"]);
        assert_eq!(p.rest, 1);
        assert_eq!(stop.parse(&["-"]).unwrap().operands, ["-"]);
    }
}
