//! `[audit] forward`'s destinations: their syntax and its checks. What
//! is sent, and how, is `audit::forward`'s.

/// A destination, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    Udp(String),
    Tcp(String),
    Unix(String),
    Http(String),
}

/// `syslog+udp://HOST:PORT`, `syslog+tcp://HOST:PORT`, `syslog+unix:///PATH`
/// or `http(s)://…`.
pub(crate) fn destination(url: &str) -> Result<Destination, String> {
    let hostport = |rest: &str| -> Result<String, String> {
        match rest.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => Ok(rest.to_string()),
            _ => Err(format!("`{url}`: write HOST:PORT after the scheme")),
        }
    };
    if let Some(rest) = url.strip_prefix("syslog+udp://") {
        return Ok(Destination::Udp(hostport(rest)?));
    }
    if let Some(rest) = url.strip_prefix("syslog+tcp://") {
        return Ok(Destination::Tcp(hostport(rest)?));
    }
    if let Some(rest) = url.strip_prefix("syslog+unix://") {
        return match rest.starts_with('/') {
            true => Ok(Destination::Unix(rest.to_string())),
            false => Err(format!("`{url}`: write syslog+unix:///absolute/path")),
        };
    }
    if url.starts_with("http://") || url.starts_with("https://") {
        return Ok(Destination::Http(url.to_string()));
    }
    Err(format!(
        "`{url}`: use syslog+udp://, syslog+tcp://, syslog+unix:// or http(s)://"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse_or_say_why_not() {
        assert_eq!(
            destination("syslog+udp://10.0.0.5:514"),
            Ok(Destination::Udp("10.0.0.5:514".into()))
        );
        assert_eq!(
            destination("syslog+tcp://siem:6514"),
            Ok(Destination::Tcp("siem:6514".into()))
        );
        assert_eq!(
            destination("syslog+unix:///dev/log"),
            Ok(Destination::Unix("/dev/log".into()))
        );
        assert!(matches!(
            destination("https://c/ingest"),
            Ok(Destination::Http(_))
        ));
        assert!(
            destination("syslog+tcp://siem")
                .unwrap_err()
                .contains("HOST:PORT")
        );
        assert!(destination("syslog+unix://dev/log").is_err());
        assert!(destination("ftp://x").unwrap_err().contains("syslog+udp"));
    }
}
