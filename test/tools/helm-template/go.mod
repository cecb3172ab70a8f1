module llmgw/test/tools/helm-template

go 1.19
