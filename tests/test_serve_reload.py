"""`attnclf serve` reloading its run on SIGHUP: the run trained again is served without a restart, and a reload that
fails keeps the model being served."""

import asyncio


def test_the_batcher_never_mixes_models_in_a_batch_and_answers_each_request_from_the_one_it_was_sent_to():
    """Requests in flight when a reload swaps the model finish on the old one; those after it get the new one."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from attnclf.serve import Batcher

    calls = []

    def model(name):
        def predict(texts):
            calls.append((name, list(texts)))
            time.sleep(0.05)
            return [f"{name}:{text}" for text in texts]
        return predict

    old, new = model("old"), model("new")

    async def scenario():
        batcher = Batcher(old, ThreadPoolExecutor(1))
        worker = asyncio.create_task(batcher.run())
        first = asyncio.ensure_future(batcher.submit(["a"]))  # runs alone; the rest queue meanwhile
        await asyncio.sleep(0.01)
        answers = await asyncio.gather(first, batcher.submit(["b"]), batcher.submit(["c"], new),
                                       batcher.submit(["d"], new), batcher.submit(["e"]))
        worker.cancel()
        return answers

    answers = asyncio.run(scenario())
    assert answers == [["old:a"], ["old:b"], ["new:c"], ["new:d"], ["old:e"]]
    assert calls == [("old", ["a"]), ("old", ["b"]), ("new", ["c", "d"]), ("old", ["e"])]
