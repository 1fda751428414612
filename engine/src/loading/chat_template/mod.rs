//! Renders a model's own Jinja chat template with minijinja, behaving like
//! HF transformers' renderer: trim/lstrip blocks, Python string methods,
//! `raise_exception`, `strftime_now`, and a `tojson` that prints what
//! Python's `json.dumps` prints (models were trained on that spacing).
//! Messages are first made into what the template takes (`messages`,
//! probed once per template by `traits`).

mod messages;
mod plain_tools;
mod traits;

pub use messages::{media_kind, media_refused};
pub use traits::{ContentForm, TemplateTraits};

use minijinja::syntax::SyntaxConfig;
use minijinja::value::{Kwargs, Serde, Value};
use minijinja::{Environment, Error, ErrorKind};
use serde::Serialize;
use serde_json::Map;

use crate::error::{EngineError, Result};

const TEMPLATE_NAME: &str = "chat";

/// What a chat template is rendered with.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TemplateInput {
    /// OpenAI-style messages (role, content, tool_calls, ...), as JSON.
    pub messages: Vec<serde_json::Value>,
    /// OpenAI-style tool definitions, if any.
    pub tools: Option<Vec<serde_json::Value>>,
    pub add_generation_prompt: bool,
    /// `chat_template_kwargs` of the request (e.g. `enable_thinking`); they
    /// become top-level template variables, as in HF.
    pub kwargs: Map<String, serde_json::Value>,
}

/// A compiled chat template plus the special tokens it may refer to.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// The Jinja text, kept so formats (tool calls, reasoning) can be
    /// detected from what the template writes.
    source: String,
    traits: TemplateTraits,
}

impl ChatTemplate {
    pub fn new(source: &str, bos_token: Option<String>, eos_token: Option<String>) -> Result<Self> {
        let mut env = Environment::new();
        env.set_syntax(
            SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(|e| EngineError::Template(describe(&e)))?,
        );
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, source.to_string())
            .map_err(|e| EngineError::Template(describe(&e)))?;
        let mut template = ChatTemplate {
            env,
            bos_token: bos_token.unwrap_or_default(),
            eos_token: eos_token.unwrap_or_default(),
            source: source.to_string(),
            traits: TemplateTraits {
                content: ContentForm::Text,
                shows_tools: false,
                shows_calls: false,
            },
        };
        template.traits = TemplateTraits::probe(|messages, tools| {
            let input = TemplateInput {
                messages: messages.to_vec(),
                tools: tools.map(<[_]>::to_vec),
                add_generation_prompt: true,
                kwargs: Map::new(),
            };
            template.render_as_is(&input).ok()
        });
        Ok(template)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The tokenizer's beginning-of-sequence token ("" when it has none).
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// What the template takes (content form, tool syntax).
    pub fn traits(&self) -> TemplateTraits {
        self.traits
    }

    /// Another template (`--chat-template`) with the same special tokens.
    pub fn replaced_by(&self, source: &str) -> Result<Self> {
        let token = |t: &str| (!t.is_empty()).then(|| t.to_string());
        ChatTemplate::new(source, token(&self.bos_token), token(&self.eos_token))
    }

    /// Renders the prompt text for `input`, its messages and tools first
    /// made into what the template takes. A template's own
    /// `raise_exception` is [`EngineError::TemplateRefused`] (it refuses
    /// the conversation); any other failure is [`EngineError::Template`].
    pub fn render(&self, input: &TemplateInput) -> Result<String> {
        let (messages, tools) =
            messages::normalize(&input.messages, input.tools.as_deref(), self.traits)?;
        self.render_as_is(&TemplateInput {
            messages,
            tools,
            add_generation_prompt: input.add_generation_prompt,
            kwargs: input.kwargs.clone(),
        })
    }

    /// Renders `input` exactly as given.
    fn render_as_is(&self, input: &TemplateInput) -> Result<String> {
        let mut ctx = input.kwargs.clone();
        ctx.insert("messages".into(), input.messages.clone().into());
        if let Some(tools) = &input.tools {
            ctx.insert("tools".into(), tools.clone().into());
        }
        ctx.insert(
            "add_generation_prompt".into(),
            input.add_generation_prompt.into(),
        );
        ctx.insert("bos_token".into(), self.bos_token.clone().into());
        ctx.insert("eos_token".into(), self.eos_token.clone().into());
        let tmpl = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| EngineError::Template(describe(&e)))?;
        tmpl.render(Value::from(Serde(&ctx)))
            .map_err(|e| match raised(&e) {
                Some(message) => EngineError::TemplateRefused(message),
                None => EngineError::Template(describe(&e)),
            })
    }
}

/// The message of a template's `raise_exception`, if that is what failed.
fn raised(e: &Error) -> Option<String> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<Raised>() {
            return Some(r.0.clone());
        }
        source = s.source();
    }
    None
}

/// Marks an error as the template's own `raise_exception`.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

fn describe(e: &Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

fn raise_exception(message: String) -> std::result::Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

fn strftime_now(format: String) -> String {
    chrono::Local::now().format(&format).to_string()
}

/// `tojson(indent=None)` with Python `json.dumps` spacing: `", "` between
/// items and `": "` after keys when compact; non-ASCII kept as is.
fn tojson(value: &Value, kwargs: Kwargs) -> std::result::Result<Value, Error> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let mut out = Vec::new();
    let result = match indent {
        Some(n) => {
            let pad = vec![b' '; n];
            let fmt = serde_json::ser::PrettyFormatter::with_indent(&pad);
            value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, fmt))
        }
        None => value.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            PythonCompact,
        )),
    };
    result.map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))?;
    let text = String::from_utf8(out).expect("serde_json writes UTF-8");
    Ok(Value::from_safe_string(text))
}

/// serde_json formatter reproducing Python's default `json.dumps` separators.
struct PythonCompact;

impl serde_json::ser::Formatter for PythonCompact {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, input: TemplateInput) -> Result<String> {
        ChatTemplate::new(src, Some("<s>".into()), Some("</s>".into()))?.render(&input)
    }

    fn user(text: &str) -> TemplateInput {
        TemplateInput {
            messages: vec![json!({"role": "user", "content": text})],
            add_generation_prompt: true,
            ..Default::default()
        }
    }

    #[test]
    fn tojson_matches_python_json_dumps() {
        let out = render(
            "{{ messages[0] | tojson }}|{{ {'a': [1, 2.5], 'é': none} | tojson }}",
            user("hi <b>"),
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"role": "user", "content": "hi <b>"}|{"a": [1, 2.5], "é": null}"#
        );
        let out = render("{{ {'a': 1} | tojson(indent=2) }}", user("x")).unwrap();
        assert_eq!(out, "{\n  \"a\": 1\n}");
    }

    #[test]
    fn raise_exception_reports_the_template_message() {
        let err = render(
            "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}",
            user("x"),
        )
        .unwrap_err();
        assert!(
            matches!(&err, EngineError::TemplateRefused(m) if m == "system first"),
            "{err}"
        );
    }

    #[test]
    fn content_form_and_tool_syntax_are_probed() {
        let string_only = ChatTemplate::new(
            "{% for m in messages %}{{ m.role + ': ' + m.content }}\n{% endfor %}",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            string_only.traits(),
            TemplateTraits {
                content: ContentForm::Text,
                shows_tools: false,
                shows_calls: false,
            }
        );
        let parts_only = ChatTemplate::new(
            "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            parts_only.traits().content,
            ContentForm::Parts { strings: false }
        );
        let tools = ChatTemplate::new(
            "{% for t in tools or [] %}{{ t.function.name }}{% endfor %}\
             {% for m in messages %}{% if m.content is string %}{{ m.content }}\
             {% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}\
             {% for c in m.tool_calls or [] %}{{ c.function.name }}{% endfor %}{% endfor %}",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            tools.traits(),
            TemplateTraits {
                content: ContentForm::Parts { strings: true },
                shows_tools: true,
                shows_calls: true,
            }
        );
    }

    #[test]
    fn client_shapes_render_on_a_string_template() {
        // SmolLM2's shape: content concatenated as a string, no tool syntax.
        let src = "{% for m in messages %}<|{{ m.role }}|>{{ m['content'] + '\n' }}{% endfor %}";
        let t = ChatTemplate::new(src, None, None).unwrap();
        let input = TemplateInput {
            messages: vec![
                json!({"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}),
                json!({"role": "user", "content": [{"type": "text", "text": "Weather?"}]}),
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": "a",
                    "type": "function", "function": {"name": "w", "arguments": "{}"}}]}),
                json!({"role": "tool", "tool_call_id": "a",
                    "content": [{"type": "text", "text": "sunny"}]}),
            ],
            tools: Some(vec![json!({"type": "function", "function": {"name": "w"}})]),
            ..Default::default()
        };
        let out = t.render(&input).unwrap();
        assert!(
            out.starts_with("<|system|>Be brief.\n\nYou may call"),
            "{out}"
        );
        assert!(out.contains("<|user|>Weather?\n"), "{out}");
        assert!(
            out.contains(
                "<|assistant|><tool_call>\n{\"name\":\"w\",\"arguments\":{}}\n</tool_call>\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("<|user|><tool_response>\nsunny\n</tool_response>\n"),
            "{out}"
        );
    }

    #[test]
    fn python_methods_loop_variables_and_kwargs_work() {
        let src = "{% for m in messages %}{{ loop.index }}{% if loop.first %}F{% endif %}:\
                   {{ m.content.strip().upper() }}{% if loop.last %}L{% endif %};{% endfor %}\
                   {% if enable_thinking is defined and not enable_thinking %}NOTHINK{% endif %}\
                   {{ bos_token }}{{ eos_token }}";
        let mut input = TemplateInput {
            messages: vec![
                json!({"role": "user", "content": "  a "}),
                json!({"role": "assistant", "content": "b"}),
            ],
            ..Default::default()
        };
        input.kwargs.insert("enable_thinking".into(), json!(false));
        assert_eq!(render(src, input).unwrap(), "1F:A;2:BL;NOTHINK<s></s>");
    }

    #[test]
    fn tools_and_generation_prompt_are_visible() {
        let src =
            "{% if tools %}{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% endif %}\
                   {% if add_generation_prompt %}<assistant>{% endif %}";
        let mut input = user("x");
        input.tools = Some(vec![
            json!({"type": "function", "function": {"name": "get_weather"}}),
        ]);
        assert_eq!(render(src, input).unwrap(), "[get_weather]<assistant>");
    }

    #[test]
    fn strftime_now_formats_the_current_date() {
        let out = render("{{ strftime_now('%Y') }}", user("x")).unwrap();
        let year: i32 = out.parse().unwrap();
        assert!(year >= 2024, "{out}");
    }

    #[test]
    fn trim_and_lstrip_blocks_match_hf() {
        let src = "{% for m in messages %}\n    {{ m.content }}\n{% endfor %}";
        assert_eq!(render(src, user("x")).unwrap(), "    x\n");
    }

    #[test]
    fn syntax_errors_are_template_errors() {
        let err = ChatTemplate::new("{% for %}", None, None).err().unwrap();
        assert!(matches!(err, EngineError::Template(_)), "{err}");
    }
}
