"""The fake Dynamo frontend: OpenAI-compatible and SGLang-native routes over the toy model."""
