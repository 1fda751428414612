//! Test-only servers for the harness's tests.

// Built without the `engine` feature, some helpers go unused.
#[allow(dead_code)]
#[cfg(feature = "engine")]
pub mod faulty_server;

#[allow(dead_code)]
pub mod mock;

#[allow(dead_code)]
pub mod routing_double;

#[allow(dead_code)]
pub mod tool_choice_double;

/// Serves `app` on an ephemeral port from a thread of its own (so a test
/// without a runtime, or with one, can use it); returns its base address.
pub fn serve(app: axum::Router) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    format!("http://{addr}")
}
