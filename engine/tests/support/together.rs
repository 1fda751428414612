//! Requests submitted from separate threads released by one barrier, so
//! they reach the engine together (the batch-composition bugs live there).

use std::sync::{Arc, Barrier};

use afm_engine::{Completion, Engine, GenerationRequest};

/// Each request's completion, in request order.
pub fn release_together(engine: &Arc<Engine>, requests: Vec<GenerationRequest>) -> Vec<Completion> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let handles: Vec<_> = requests
        .into_iter()
        .map(|r| {
            let (engine, barrier) = (engine.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                engine.submit(&r).unwrap().collect_blocking().unwrap()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}
