//! The loop every streamed protocol shares: pieces the engine's events
//! were translated into are handed out first, one at a time (one engine
//! event can make several: text, each tool-call piece, the usage); the
//! stream opens once before the first engine event; a failure (the
//! engine's, or the engine gone) ends it with the protocol's error piece;
//! after its end, none. Each protocol writes only its translation
//! ([`Translate`]).

use std::collections::VecDeque;

use crate::api::error::ApiError;
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
    /// Queues the pieces of one engine event (never `Failed`); ends the
    /// queue at the last one.
    fn translate(&mut self, event: EngineEvent);
    /// Queues the protocol's error piece for `error`; the stream ends
    /// after it.
    fn failed(&mut self, error: ApiError);
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
        match t.ends().1.next().await {
            Some(EngineEvent::Failed {
                message,
                client_error,
            }) => t.failed(ApiError::failure(message, client_error)),
            None => t.failed(ApiError::new(500, "server_error", "the engine stopped")),
            Some(event) => {
                t.translate(event);
                continue;
            }
        }
        t.ends().0.end();
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc::unbounded_channel;

    use super::*;
    use crate::runtime::{FinishReason, GrammarMode, Usage};

    /// A translation that names each piece it queues.
    struct Named {
        queue: Queue<String>,
        stream: RequestStream,
    }

    impl Translate for Named {
        type Piece = String;

        fn ends(&mut self) -> (&mut Queue<String>, &mut RequestStream) {
            (&mut self.queue, &mut self.stream)
        }

        fn open(&mut self) {
            self.queue.push("open".into());
        }

        fn translate(&mut self, event: EngineEvent) {
            match event {
                EngineEvent::Started { .. } => {}
                EngineEvent::Delta { text, .. } => {
                    // One event, two pieces: both go out, in order.
                    self.queue.push(format!("text {text}"));
                    self.queue.push("after".into());
                }
                EngineEvent::Finished { .. } => {
                    self.queue.push("finished".into());
                    self.queue.end();
                }
                EngineEvent::Failed { .. } => panic!("a failure reached translate"),
            }
        }

        fn failed(&mut self, error: ApiError) {
            self.queue
                .push(format!("error {} {}", error.status, error.message));
        }
    }

    fn delta(text: &str) -> EngineEvent {
        EngineEvent::Delta {
            text: text.into(),
            reasoning: String::new(),
            tool_calls: Vec::new(),
            logprobs: Vec::new(),
        }
    }

    /// Every piece of a stream whose engine sends `events`, then (unless
    /// `hold` keeps it) drops its end of the channel.
    async fn pieces(events: Vec<EngineEvent>, hold: bool) -> Vec<String> {
        let (tx, rx) = unbounded_channel();
        for e in events {
            tx.send(e).unwrap();
        }
        let kept = hold.then_some(tx);
        let mut t = Named {
            queue: Queue::new(),
            stream: RequestStream::of(rx, GrammarMode::None),
        };
        let mut out = Vec::new();
        // A stream that does not end after its last piece waits on the
        // held channel: named, not hung.
        let wait = std::time::Duration::from_secs(1);
        while let Some(p) = tokio::time::timeout(wait, next_piece(&mut t))
            .await
            .unwrap_or(Some("(no end)".into()))
        {
            let end = p == "(no end)";
            out.push(p);
            if end {
                break;
            }
        }
        drop(kept);
        out
    }

    #[tokio::test]
    async fn a_stream_opens_once_and_ends_at_its_finish_or_failure() {
        let finished = EngineEvent::Finished {
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        };
        // Held open after the finish: the stream ends at it anyway.
        assert_eq!(
            pieces(vec![delta("a"), finished, delta("late")], true).await,
            ["open", "text a", "after", "finished"]
        );
        let failed = EngineEvent::Failed {
            message: "boom".into(),
            client_error: false,
        };
        assert_eq!(
            pieces(vec![delta("a"), failed, delta("late")], true).await,
            ["open", "text a", "after", "error 500 boom"]
        );
        // The engine gone before the finish: the protocol's error, once.
        assert_eq!(
            pieces(vec![delta("a")], false).await,
            ["open", "text a", "after", "error 500 the engine stopped"]
        );
    }
}
