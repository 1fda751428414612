//! The loop every streamed protocol shares: pieces the engine's events
//! were translated into are handed out first, one at a time (one engine
//! event can make several: text, each tool-call piece, the usage); the
//! stream opens once before the first engine event; after its end, none.
//! Each protocol writes only its translation ([`Translate`]).

use std::collections::VecDeque;

use crate::runtime::{EngineEvent, RequestStream};

/// Translated pieces not yet handed out, and where the stream stands.
pub(crate) struct Queue<P> {
    pieces: VecDeque<P>,
    opened: bool,
    done: bool,
}

impl<P> Queue<P> {
    pub(crate) fn new() -> Self {
        Queue {
            pieces: VecDeque::new(),
            opened: false,
            done: false,
        }
    }

    pub(crate) fn push(&mut self, piece: P) {
        self.pieces.push_back(piece);
    }

    /// No engine event is read after this; what is queued still goes out.
    pub(crate) fn end(&mut self) {
        self.done = true;
    }
}

/// One protocol's translation of a request's engine events.
pub(crate) trait Translate {
    type Piece;
    /// Its queue, and the request's engine events it reads.
    fn ends(&mut self) -> (&mut Queue<Self::Piece>, &mut RequestStream);
    /// Queues what the stream opens with, before any engine event.
    fn open(&mut self) {}
    /// Queues the pieces of one engine event; `None`: the engine stopped
    /// without finishing the request. Ends the queue at the last one.
    fn translate(&mut self, event: Option<EngineEvent>);
}

/// The next piece of `t`'s stream; `None` after the last.
pub(crate) async fn next_piece<T: Translate>(t: &mut T) -> Option<T::Piece> {
    loop {
        let (queue, _) = t.ends();
        if let Some(piece) = queue.pieces.pop_front() {
            return Some(piece);
        }
        if queue.done {
            return None;
        }
        if !queue.opened {
            queue.opened = true;
            t.open();
            continue;
        }
        let event = t.ends().1.next().await;
        t.translate(event);
    }
}
