//! `afm-serve`: the engine's command line. Without a subcommand it serves
//! the OpenAI API over HTTP; `generate` answers one message through the
//! same engine and exits;
//! `convert` writes a model as an MLX/HF safetensors folder.

use std::io::Write;
use std::process::ExitCode;

use afm_engine::loading::{convert, ConvertReport, ExportDtype};
use afm_engine::models::registry;
use std::sync::Arc;

use afm_engine::api::ApiContext;
use afm_engine::api::{self, ServeFlags};
use afm_engine::{Engine, EngineEvent, GenerationRequest, SamplingParams};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "afm-serve",
    version,
    about = "afm's MLX inference engine and OpenAI-compatible server"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeFlags,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a reply to one user message and print it.
    Generate {
        /// Model: the alias `smollm2`, a .gguf file, an MLX/HF folder, or an
        /// HF repo id present in the local HF cache.
        #[arg(long, default_value = "smollm2")]
        model: String,
        /// The user message.
        #[arg(long)]
        prompt: String,
        /// An optional system message.
        #[arg(long)]
        system: Option<String>,
        /// Tokens to generate at most.
        #[arg(long, default_value_t = 256)]
        max_tokens: usize,
        /// Sampling temperature; 0 (default) is greedy, raise it for variety.
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        /// Nucleus sampling mass (default 1: off); used when temperature > 0.
        #[arg(long, default_value_t = 1.0)]
        top_p: f32,
        /// Sampling seed (default: a random one), for reproducible samples.
        #[arg(long)]
        seed: Option<u64>,
        /// Print token counts and speed to stderr.
        #[arg(long)]
        verbose: bool,
    },
    /// Export a model (GGUF included) as an MLX/HF safetensors folder that
    /// afm and mlx-lm load.
    Convert {
        /// Model: the alias `smollm2`, a .gguf file, an MLX/HF folder, or an
        /// HF repo id present in the local HF cache.
        #[arg(long)]
        model: String,
        /// Output folder; must not exist or be empty.
        #[arg(long)]
        out: std::path::PathBuf,
        /// keep (quantized tensors as stored, MLX format), f32, f16 or bf16
        /// (dequantized).
        #[arg(long, default_value = "keep")]
        dtype: String,
    },
}

fn main() -> ExitCode {
    afm_engine::cpu::blas::restart_for_openblas_core();
    // A bug must still end in one readable line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.payload_as_str().unwrap_or("unknown panic");
        let at = info
            .location()
            .map(|l| format!(" (at {}:{})", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!("afm-serve: internal error: {}{at}", msg.replace('\n', " "));
    }));
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("afm-serve: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        None => serve(cli.serve),
        Some(Command::Generate {
            model,
            prompt,
            system,
            max_tokens,
            temperature,
            top_p,
            seed,
            verbose,
        }) => {
            anyhow::ensure!(temperature >= 0.0, "--temperature must be >= 0");
            anyhow::ensure!(top_p > 0.0 && top_p <= 1.0, "--top-p must be in (0, 1]");
            let mut messages = Vec::new();
            if let Some(system) = system {
                messages.push(serde_json::json!({"role": "system", "content": system}));
            }
            messages.push(serde_json::json!({"role": "user", "content": prompt}));
            let mut request = GenerationRequest::chat(messages);
            request.max_tokens = Some(max_tokens);
            request.sampling = SamplingParams {
                temperature,
                top_p,
                seed,
                ..Default::default()
            };
            // The server's path: its engine, its request checks, its
            // reasoning and tool parsers (flags before `generate` apply).
            let engine = Engine::start(&model, cli.serve.engine_config()?)?;
            let start = std::time::Instant::now();
            let mut events = engine.submit(&request)?;
            let mut stdout = std::io::stdout().lock();
            let mut stderr = std::io::stderr().lock();
            let (mut finished, mut thought) = (None, false);
            while let Some(event) = events.next_blocking() {
                match event {
                    EngineEvent::Started { .. } => {}
                    EngineEvent::Delta {
                        text,
                        reasoning,
                        tool_calls,
                        ..
                    } => {
                        // Reasoning and calls go apart from the answer,
                        // as the APIs return them.
                        if verbose && !reasoning.is_empty() {
                            let _ = stderr.write_all(reasoning.as_bytes());
                            thought = true;
                        }
                        for call in tool_calls {
                            let _ = writeln!(stderr, "tool call: {call:?}");
                        }
                        let _ = stdout.write_all(text.as_bytes());
                        let _ = stdout.flush();
                    }
                    EngineEvent::Finished {
                        finish_reason,
                        usage,
                    } => {
                        finished = Some((finish_reason, usage));
                        break;
                    }
                    EngineEvent::Failed { message, .. } => anyhow::bail!(message),
                }
            }
            writeln!(stdout)?;
            if thought {
                writeln!(stderr)?;
            }
            let (finish_reason, usage) =
                finished.ok_or_else(|| anyhow::anyhow!("the engine stopped mid-reply"))?;
            if verbose {
                eprintln!(
                    "prompt {} tokens, completion {} tokens ({} reasoning), {:.2} s, finish_reason {}",
                    usage.prompt_tokens,
                    usage.completion_tokens,
                    usage.reasoning_tokens,
                    start.elapsed().as_secs_f64(),
                    finish_reason.as_str()
                );
            }
            Ok(())
        }
        Some(Command::Convert { model, out, dtype }) => {
            let dtype = ExportDtype::from_name(&dtype)?;
            let start = std::time::Instant::now();
            let report = convert(&model, &out, dtype, registry::family)?;
            print_convert_report(&report, dtype, start.elapsed().as_secs_f64());
            Ok(())
        }
    }
}

fn print_convert_report(report: &ConvertReport, dtype: ExportDtype, secs: f64) {
    let size = |bytes: u64| match bytes {
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} kB", b as f64 / 1e3),
        b => format!("{b} B"),
    };
    let weights = match report.quantization {
        Some((group, bits)) => format!("quantized {bits}-bit, group size {group}"),
        None => report.torch_dtype.clone(),
    };
    println!(
        "wrote {} (--dtype {}: {weights})",
        report.out_dir.display(),
        dtype.name()
    );
    for (name, bytes) in &report.files {
        println!("  {name:<24} {:>10}", size(*bytes));
    }
    println!(
        "{} tensors, {} in total, {secs:.1} s",
        report.tensors,
        size(report.total_bytes())
    );
    for (prefix, bits) in &report.quantization_overrides {
        println!("{prefix} stays {bits}-bit (listed in config.json's quantization)");
    }
    if report.rope_unpermuted {
        println!("q_proj/k_proj rows put back from GGUF's RoPE order into HF's");
    }
    if !report.skipped.is_empty() {
        println!("not exported: {}", report.skipped.join(", "));
    }
}

fn serve(args: ServeFlags) -> anyhow::Result<()> {
    let level: tracing::Level = args
        .log_level
        .parse()
        .map_err(|_| anyhow::anyhow!("--log-level: unknown level '{}'", args.log_level))?;
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let server = args.server_config()?;
    let config = args.engine_config()?;
    let engine = Engine::start(&args.model, config)?;
    let api = Arc::new(ApiContext::new(engine, &args.model));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(api::serve(api.clone(), server, api::shutdown_signal()))?;
    // In-flight requests are done; dropping the engine stops its thread.
    drop(api);
    Ok(())
}
