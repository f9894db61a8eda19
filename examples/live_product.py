"""A product that answers its users through RLAnything and feeds the loop (docs/live-usage.md).

Usage: python examples/live_product.py OPENAI_URL INGEST_URL TENANT_KEY
"""
import sys
import uuid

import httpx
from openai import OpenAI

openai_url, ingest_url, key = sys.argv[1:4]
llm = OpenAI(base_url=openai_url, api_key=key)  # the tenant key is the api_key
ingest = httpx.Client(base_url=ingest_url, headers={"Authorization": f"Bearer {key}"})

episode = f"conv-{uuid.uuid4().hex[:8]}"
question = "I am jane@example.org. What is 17 + 25? Answer with \\boxed{n}."
reply = llm.chat.completions.with_raw_response.create(
    model="policy", messages=[{"role": "user", "content": question}], max_tokens=16,
    extra_headers={"X-RLA-Episode": episode, "X-RLA-Turn": "t1", "X-RLA-Consent": "training,tasks"})
answer = reply.parse()
print("captured:", reply.headers["X-RLA-Capture"], "| answer:", repr(answer.choices[0].message.content))
transcript = {"episodeId": episode, "revision": 0, "ended": True, "userRef": "user-42",
              "consent": {"training": True}, "taskType": "arithmetic",
              "messages": [{"role": "user", "content": question},
                           {"role": "assistant", "content": answer.choices[0].message.content,
                            "completionId": answer.id}]}
print("episode:", ingest.post("/episodes", json=transcript).json())
thumbs = {"feedbackId": f"{episode}-1", "episodeId": episode, "kind": "KIND_THUMBS", "value": 1}
print("feedback:", ingest.post("/feedback", json=thumbs).json())
print("state:", ingest.get(f"/episodes/{episode}").json())
