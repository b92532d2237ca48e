# Sandbox images (paper §3.2: every task runs in its own container). Built without
# a registry and cached by content hash; the JSON outputs record what was built.


rule toolbox:
    output:
        "results/images/toolbox.json",
    log:
        "results/logs/images/toolbox.log",
    benchmark:
        "results/benchmarks/images/toolbox.tsv"
    conda:
        "../envs/sandbox.yaml"
    script:
        "../scripts/build_toolbox.py"


rule base_image:
    output:
        "results/images/base.json",
    log:
        "results/logs/images/base.log",
    benchmark:
        "results/benchmarks/images/base.tsv"
    conda:
        "../envs/sandbox.yaml"
    params:
        backend=config["sandbox"]["backend"],
    script:
        "../scripts/build_base_image.py"


rule domain_image:
    input:
        base="results/images/base.json",
        definition=domain_definition,
    output:
        "results/images/domains/{domain}.json",
    log:
        "results/logs/images/{domain}.log",
    benchmark:
        "results/benchmarks/images/{domain}.tsv"
    conda:
        "../envs/sandbox.yaml"
    params:
        backend=config["sandbox"]["backend"],
    script:
        "../scripts/build_domain_image.py"


rule images:
    input:
        "results/images/toolbox.json",
        expand("results/images/domains/{domain}.json", domain=DOMAINS),
