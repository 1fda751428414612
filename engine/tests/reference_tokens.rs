//! The engine against an independent implementation of the bundled model.
//! `fixtures/reference/smollm2_greedy.json` holds, per prompt, the rendered
//! chat template, the prompt ids and 16 greedy ids computed outside afm
//! (see the script beside it for the exact command).

use afm_engine::loading::TemplateInput;
use afm_engine::runtime::argmax;
use afm_engine::LoadedModel;
use serde_json::Value;

fn fixture() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/reference/smollm2_greedy.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn template_tokens_and_greedy_ids_match_the_reference() {
    let fixture = fixture();
    let model = LoadedModel::load("smollm2").expect("run scripts/setup.sh first");
    for case in fixture["cases"].as_array().unwrap() {
        let user = case["user"].as_str().unwrap();
        let rendered = model
            .template
            .render(&TemplateInput {
                messages: vec![serde_json::json!({"role": "user", "content": user})],
                add_generation_prompt: true,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            rendered,
            case["rendered"].as_str().unwrap(),
            "template for {user:?}"
        );

        let prompt = model.tokenizer.encode(&rendered).unwrap();
        assert_eq!(prompt, ids(&case["prompt_ids"]), "prompt ids for {user:?}");

        let expected = ids(&case["greedy_ids"]);
        let mut cache = model.model.new_cache();
        let mut input = prompt.clone();
        let mut got = Vec::new();
        // The reference keeps going past EOS, so this loop does too.
        for _ in 0..expected.len() {
            let logits = model.model.forward(&input, &mut cache).unwrap();
            let next = argmax(logits.as_slice::<f32>());
            got.push(next);
            input = vec![next];
        }
        assert_eq!(got, expected, "greedy ids for {user:?}");
    }
}
