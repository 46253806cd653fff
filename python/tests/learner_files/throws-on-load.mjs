// A learner file that throws while it loads.
throw new Error("broken at the top level");
