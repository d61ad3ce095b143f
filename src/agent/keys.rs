//! The user's keys on their way to the agent's seat, each with the time
//! it came: what was typed before something was shown can then be told
//! from what was typed after it. What it leaves to others: who sends
//! them (the session's bridge) and what they mean (the seat).

use std::time::Instant;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

/// A read of the client's keys, and when it came.
pub(crate) type Key = (Instant, Bytes);

/// The receiving end.
pub(crate) struct Keys(mpsc::Receiver<Key>);

impl Keys {
    pub(crate) fn new(rx: mpsc::Receiver<Key>) -> Keys {
        Keys(rx)
    }

    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        self.0.recv().await.map(|(_, keys)| keys)
    }

    pub(crate) fn try_recv(&mut self) -> Result<Bytes, TryRecvError> {
        self.0.try_recv().map(|(_, keys)| keys)
    }

    /// The keys come so far that came after `seen`, in order; those that
    /// came before it are dropped.
    pub(crate) fn typed_after(&mut self, seen: Instant) -> Vec<Bytes> {
        let mut after = Vec::new();
        while let Ok((at, keys)) = self.0.try_recv() {
            if at > seen {
                after.push(keys);
            }
        }
        after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_told_apart_by_when_they_came() {
        let (tx, rx) = mpsc::channel(8);
        let mut keys = Keys::new(rx);
        let before = Instant::now();
        tx.send((before, Bytes::from_static(b"early")))
            .await
            .unwrap();
        let seen = Instant::now();
        let after = seen + std::time::Duration::from_millis(1);
        tx.send((after, Bytes::from_static(b"late"))).await.unwrap();
        assert_eq!(keys.typed_after(seen), [Bytes::from_static(b"late")]);
        assert!(keys.typed_after(seen).is_empty());
        tx.send((after, Bytes::from_static(b"x"))).await.unwrap();
        assert_eq!(keys.recv().await, Some(Bytes::from_static(b"x")));
        assert!(keys.try_recv().is_err());
    }
}
