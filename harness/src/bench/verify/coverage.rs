//! Which isolation checks covered how many replies of a level, so that
//! "0 corrupted" never stands for "nothing was checked". A reply is
//! covered when one check could have caught another request's text in
//! it: it echoed its own marker (or held another's), it asked for a
//! schema whose constant is its own nonce, or it was replayed alone.

use serde::{Deserialize, Serialize};

use crate::bench::sample::Sample;
use crate::bench::verify::own_marker_seen;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    pub served: usize,
    /// Replies that held their own marker, or another request's.
    pub marker: usize,
    /// Replies to requests whose schema made their nonce a constant.
    pub schema_nonce: usize,
    /// Replies compared with their replay alone.
    pub replayed: usize,
    /// Replies at least one of the three covered.
    pub checked: usize,
}

impl Coverage {
    pub fn of<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Coverage {
        let mut c = Coverage::default();
        for s in samples.into_iter().filter(|s| s.served()) {
            let marker =
                own_marker_seen(s) || s.failed_checks.iter().any(|f| f.check == "isolation");
            let nonce = s.schema;
            let replayed = s.replay.is_some();
            c.served += 1;
            c.marker += usize::from(marker);
            c.schema_nonce += usize::from(nonce);
            c.replayed += usize::from(replayed);
            c.checked += usize::from(marker || nonce || replayed);
        }
        c
    }

    pub fn describe(&self) -> String {
        let by = format!(
            "marker echoed {}, schema nonce {}, replayed alone {}",
            self.marker, self.schema_nonce, self.replayed
        );
        if self.served > 0 && self.checked == 0 {
            format!(
                "cross-talk NOT checked on any of {} replies ({by})",
                self.served
            )
        } else {
            format!(
                "cross-talk checked on {} of {} replies ({by})",
                self.checked, self.served
            )
        }
    }
}
