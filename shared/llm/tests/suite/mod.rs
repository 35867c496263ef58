mod anthropic_wire;
mod equivalence;
mod mockllm_bin;
mod openai_wire;
mod prompt_cache;
mod robustness;
mod script_provider;
mod support;
