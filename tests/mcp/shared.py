"""What the SDK end-to-end scripts share: a failing check, and a tool call that checks
the answer is no error, validates `structuredContent` against the tool's `outputSchema`
and that the text content is the same JSON."""

import json

import jsonschema


def check(condition, what):
    if not condition:
        raise AssertionError(what)


async def checked_call(client, tools, name, arguments):
    result = await client.call_tool(name, arguments)
    check(not result.is_error, f"{name}({arguments}): {result}")
    structured = result.structured_content
    jsonschema.validate(structured, tools[name].output_schema,
                        cls=jsonschema.Draft202012Validator)
    check(json.loads(result.content[0].text) == structured,
          f"{name}: the text content is the structured content")
    return structured
