//! The channels between a session's two pumps and its seat, and what
//! goes over them: questions and drawing requests between the client pump
//! and the seat, keys and typing between the seat and the target pump.
//!
//! What it leaves to others: what each end does with them (`bridge`,
//! `seat`).

use bytes::Bytes;
use tokio::sync::mpsc;

use super::Asked;
use crate::agent::render::Draw;
use crate::terminal::CommandRecord;

/// Keys queued for the seat beyond this are dropped.
const KEYS_QUEUE: usize = 64;

/// The client pump's ends of the wiring.
pub(crate) struct ClientEnds {
    pub(crate) questions: mpsc::UnboundedSender<Asked>,
    pub(crate) draw: mpsc::UnboundedReceiver<Draw>,
    /// Each command line the shell finished, with its record if one ran.
    pub(crate) lines: mpsc::UnboundedSender<Option<CommandRecord>>,
}

/// What the seat hands the target pump to type into the shell.
pub(crate) enum Input {
    /// The seat's own keys (a command, an interruption, a fresh prompt):
    /// typed as they are.
    Seat(Bytes),
    /// Keys the user typed once the answer was complete, before the
    /// prompt was back, handed back with the terminal: typed as if they
    /// came now, through every check the user's keys go through.
    Ahead(Bytes),
}

/// The target pump's ends of the wiring.
pub(crate) struct TargetEnds {
    pub(crate) typed: mpsc::UnboundedReceiver<Input>,
    pub(crate) keys: mpsc::Sender<crate::agent::keys::Key>,
    pub(crate) cancel: mpsc::Sender<()>,
}

/// The seat's ends of the wiring.
pub(crate) struct SeatEnds {
    pub(super) questions: mpsc::UnboundedReceiver<Asked>,
    pub(super) draw: mpsc::UnboundedSender<Draw>,
    pub(super) lines: mpsc::UnboundedReceiver<Option<CommandRecord>>,
    pub(super) typed: mpsc::UnboundedSender<Input>,
    pub(super) keys: crate::agent::keys::Keys,
    pub(super) cancel: mpsc::Receiver<()>,
}

/// The channels between the pumps and the seat.
pub(crate) fn wires() -> (ClientEnds, TargetEnds, SeatEnds) {
    let (questions_tx, questions_rx) = mpsc::unbounded_channel();
    let (draw_tx, draw_rx) = mpsc::unbounded_channel();
    let (lines_tx, lines_rx) = mpsc::unbounded_channel();
    let (typed_tx, typed_rx) = mpsc::unbounded_channel();
    let (keys_tx, keys_rx) = mpsc::channel(KEYS_QUEUE);
    let (cancel_tx, cancel_rx) = mpsc::channel(1);
    (
        ClientEnds {
            questions: questions_tx,
            draw: draw_rx,
            lines: lines_tx,
        },
        TargetEnds {
            typed: typed_rx,
            keys: keys_tx,
            cancel: cancel_tx,
        },
        SeatEnds {
            questions: questions_rx,
            draw: draw_tx,
            lines: lines_rx,
            typed: typed_tx,
            keys: crate::agent::keys::Keys::new(keys_rx),
            cancel: cancel_rx,
        },
    )
}
