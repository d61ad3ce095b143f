//! `walissh play`: a recording replayed in the terminal, as `asciinema
//! play` does (output events written at their times, `--speed` dividing
//! them, the header's `idle_time_limit` capping pauses), with its markers
//! listed (`--markers`) and a start at one of them (`--from`: what came
//! before is written at once, so the screen is as it was there).
//!
//! What it owns: reading an asciicast v2 file (a line that is not an
//! event is skipped), the markers, the timing. What it leaves to others:
//! finding a session's file (`db`), writing recordings (`recording`).

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// A recording, read.
pub(crate) struct Cast {
    idle_limit: Option<f64>,
    /// Time, code, data, in file order.
    events: Vec<(f64, String, String)>,
}

/// One marker: its number (from 1), time and label.
pub(crate) struct Marker {
    pub(crate) number: usize,
    pub(crate) at: f64,
    pub(crate) label: String,
    index: usize,
}

pub(crate) fn load(path: &Path) -> Result<Cast, String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(err)?;
    read(std::io::BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))
}

/// A recording from any reader: what it is not is said, never a panic.
pub(crate) fn read(input: impl BufRead) -> Result<Cast, String> {
    let err = |e: std::io::Error| e.to_string();
    let mut lines = input.lines();
    let header: Value = match lines.next() {
        Some(l) => {
            serde_json::from_str(&l.map_err(err)?).map_err(|e| format!("not an asciicast: {e}"))?
        }
        None => return Err("empty".into()),
    };
    if header["version"] != 2 {
        return Err("not an asciicast v2 file".into());
    }
    let mut events = Vec::new();
    for line in lines {
        let line = line.map_err(err)?;
        if let Ok(Value::Array(a)) = serde_json::from_str::<Value>(&line)
            && let [Value::Number(t), Value::String(code), Value::String(data)] = a.as_slice()
        {
            events.push((t.as_f64().unwrap_or(0.0), code.clone(), data.clone()));
        }
    }
    Ok(Cast {
        idle_limit: header["idle_time_limit"].as_f64(),
        events,
    })
}

impl Cast {
    pub(crate) fn markers(&self) -> Vec<Marker> {
        self.events
            .iter()
            .enumerate()
            .filter(|(_, (_, code, _))| code == "m")
            .enumerate()
            .map(|(n, (index, (at, _, label)))| Marker {
                number: n + 1,
                at: *at,
                label: label.clone(),
                index,
            })
            .collect()
    }

    /// The marker `from` names: its number, or the first whose label holds it.
    pub(crate) fn marker(&self, from: &str) -> Result<Marker, String> {
        let markers = self.markers();
        let found = match from.parse::<usize>() {
            Ok(n) => markers.into_iter().find(|m| m.number == n),
            Err(_) => markers.into_iter().find(|m| m.label.contains(from)),
        };
        found.ok_or_else(|| {
            format!("no marker `{from}` (walissh play SESSION --markers lists them)")
        })
    }

    /// Writes the output events to `out` at their times divided by
    /// `speed`, from the start or from marker `from`.
    pub(crate) fn play(
        &self,
        speed: f64,
        from: Option<&Marker>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let start = from.map_or(0, |m| m.index);
        // Before the marker: at once, so the screen is what it was there.
        for (_, code, data) in &self.events[..start] {
            if code == "o" {
                out.write_all(data.as_bytes())?;
            }
        }
        out.flush()?;
        let mut last = from.map_or(0.0, |m| m.at);
        for (at, code, data) in &self.events[start..] {
            let mut pause = (at - last).max(0.0);
            if let Some(limit) = self.idle_limit {
                pause = pause.min(limit);
            }
            last = *at;
            if code != "o" {
                continue;
            }
            let wait = pause / speed.max(f64::MIN_POSITIVE);
            if wait > 0.0 {
                std::thread::sleep(Duration::from_secs_f64(wait.min(3600.0)));
            }
            out.write_all(data.as_bytes())?;
            out.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cast(text: &str) -> Cast {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.cast");
        std::fs::write(&p, text).unwrap();
        load(&p).unwrap()
    }

    #[test]
    fn markers_are_numbered_and_play_starts_at_one() {
        let c = cast(
            "{\"version\": 2, \"width\": 80, \"height\": 24}\n\
             [0.1, \"o\", \"a\"]\n[0.2, \"m\", \"$ ls\"]\nnot json\n[0.3, \"o\", \"b\"]\n\
             [0.4, \"m\", \"? why\"]\n[0.5, \"o\", \"c\"]\n",
        );
        let m = c.markers();
        assert_eq!(m.len(), 2);
        assert_eq!((m[1].number, m[1].label.as_str()), (2, "? why"));
        assert_eq!(c.marker("why").unwrap().number, 2);
        assert!(c.marker("9").is_err());
        let mut out = Vec::new();
        c.play(1e9, None, &mut out).unwrap();
        assert_eq!(out, b"abc");
        let mut out = Vec::new();
        c.play(1e9, Some(&c.marker("2").unwrap()), &mut out)
            .unwrap();
        assert_eq!(out, b"abc");
    }

    #[test]
    fn what_is_not_a_cast_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        std::fs::write(&p, "{\"version\": 1}\n").unwrap();
        assert!(load(&p).err().unwrap().contains("v2"));
        std::fs::write(&p, "").unwrap();
        assert!(load(&p).err().unwrap().contains("empty"));
    }
}
