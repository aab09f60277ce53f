"""The task world: fictional documents, BM25 search, questions and their gold trajectories.

One world for every user: the research suite (`evals`) writes it as files and scores against
it, `weact data generate` (`trainers.tasks`) solves its questions, and a runtime node
(`--kb`) and the demo offer its MCP tools (`tasks.tools`). A neutral package: it imports
nothing of the project, so `runtime`, `trainers` and `evals` may all import it.

    world.py         countries, cities, people, organisations from a seed
    documents.py     one short document per entity (the knowledge base)
    questions.py     multi-hop questions with gold answers, documents and searches
    research.py      the three splits' worlds from `name:seed`; the default world
    search.py        BM25 over the documents (`bm25s`), fetch by id
    calc.py          safe arithmetic for `calculate`
    tools.py         the MCP server: search, fetch_document, calculate
    trajectories.py  gold trajectories as chat messages, phase by phase
"""
