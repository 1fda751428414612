//! `afm-serve`: the engine's command line. For now it has `generate`, which
//! renders the model's chat template for one user message and prints the reply.

use std::io::Write;
use std::process::ExitCode;

use afm_engine::chat_template::TemplateInput;
use afm_engine::{generate, GenerationParams, LoadedModel, SamplingParams};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "afm-serve", version, about = "afm's MLX inference engine")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
        #[arg(long, default_value_t = 256)]
        max_tokens: usize,
        /// 0 is greedy.
        #[arg(long, default_value_t = 0.0)]
        temperature: f32,
        #[arg(long, default_value_t = 1.0)]
        top_p: f32,
        #[arg(long)]
        seed: Option<u64>,
        /// Print token counts and speed to stderr.
        #[arg(long)]
        verbose: bool,
    },
}

fn main() -> ExitCode {
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
        Command::Generate {
            model,
            prompt,
            system,
            max_tokens,
            temperature,
            top_p,
            seed,
            verbose,
        } => {
            anyhow::ensure!(temperature >= 0.0, "--temperature must be >= 0");
            anyhow::ensure!(top_p > 0.0 && top_p <= 1.0, "--top-p must be in (0, 1]");
            let loaded = LoadedModel::load(&model)?;
            let mut messages = Vec::new();
            if let Some(system) = system {
                messages.push(serde_json::json!({"role": "system", "content": system}));
            }
            messages.push(serde_json::json!({"role": "user", "content": prompt}));
            let prompt_ids = loaded.prompt_tokens(&TemplateInput {
                messages,
                add_generation_prompt: true,
                ..Default::default()
            })?;
            let params = GenerationParams {
                max_tokens,
                sampling: SamplingParams {
                    temperature,
                    top_p,
                    seed,
                    ..Default::default()
                },
            };
            let start = std::time::Instant::now();
            let mut stdout = std::io::stdout().lock();
            let out = generate(
                loaded.model.as_ref(),
                &loaded.tokenizer,
                &loaded.eos,
                &prompt_ids,
                &params,
                |piece| {
                    let _ = stdout.write_all(piece.as_bytes());
                    let _ = stdout.flush();
                },
            )?;
            writeln!(stdout)?;
            if verbose {
                let secs = start.elapsed().as_secs_f64();
                eprintln!(
                    "prompt {} tokens, completion {} tokens, {:.2} s, finish_reason {}",
                    out.prompt_tokens,
                    out.tokens.len(),
                    secs,
                    out.finish_reason.as_str()
                );
            }
            Ok(())
        }
    }
}
